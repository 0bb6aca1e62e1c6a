//! NFS attributes: a stat as `fattr3` and `wcc_attr`, and SETATTR applied through a
//! descriptor of the object.

use std::fs::File;
use std::os::fd::{AsFd, OwnedFd};

use nfs3_types::nfs3::{
    Nfs3Option, fattr3, ftype3, nfsstat3, nfstime3, sattr3, set_atime, set_mtime, specdata3,
    wcc_attr,
};

use super::{DirFs, NfsResult, io_err};
use crate::identity::Caller;
use crate::sys::{self, Stat};

fn time3(t: (i64, u32)) -> nfstime3 {
    nfstime3 {
        seconds: t.0.clamp(0, i64::from(u32::MAX)) as u32,
        nseconds: t.1,
    }
}

pub(super) fn set_time(a: set_atime) -> sys::SetTime {
    match a {
        set_atime::DONT_CHANGE => None,
        set_atime::SET_TO_SERVER_TIME => Some(None),
        set_atime::SET_TO_CLIENT_TIME(t) => Some(Some((i64::from(t.seconds), t.nseconds))),
    }
}

pub(super) fn set_time_m(m: set_mtime) -> sys::SetTime {
    match m {
        set_mtime::DONT_CHANGE => None,
        set_mtime::SET_TO_SERVER_TIME => Some(None),
        set_mtime::SET_TO_CLIENT_TIME(t) => Some(Some((i64::from(t.seconds), t.nseconds))),
    }
}

impl DirFs {
    /// NFS attributes of a stat.
    pub fn fattr(&self, st: &Stat) -> fattr3 {
        let type_ = match st.file_type() {
            libc::S_IFDIR => ftype3::NF3DIR,
            libc::S_IFLNK => ftype3::NF3LNK,
            libc::S_IFBLK => ftype3::NF3BLK,
            libc::S_IFCHR => ftype3::NF3CHR,
            libc::S_IFSOCK => ftype3::NF3SOCK,
            libc::S_IFIFO => ftype3::NF3FIFO,
            _ => ftype3::NF3REG,
        };
        fattr3 {
            type_,
            mode: st.mode & 0o7777,
            nlink: st.nlink,
            uid: st.uid,
            gid: st.gid,
            size: st.size,
            used: st.blocks.saturating_mul(512),
            rdev: specdata3 {
                specdata1: st.rdev.0,
                specdata2: st.rdev.1,
            },
            fsid: self.inner.fsid,
            fileid: st.ino,
            atime: time3(st.atime),
            mtime: time3(st.mtime),
            ctime: time3(st.ctime),
        }
    }

    /// Applies a SETATTR-style change through an fd of the object (never a path).
    pub(super) fn apply_sattr(&self, fd: &OwnedFd, st: &Stat, attr: &sattr3) -> NfsResult<()> {
        // Refuse a size that cannot be set before changing anything else.
        if let Nfs3Option::Some(size) = attr.size {
            if st.is_dir() {
                return Err(nfsstat3::NFS3ERR_ISDIR);
            }
            if !st.is_reg() {
                return Err(nfsstat3::NFS3ERR_INVAL);
            }
            // ftruncate takes a signed offset: 2^63 and above is not a size.
            if size > i64::MAX as u64 {
                return Err(nfsstat3::NFS3ERR_FBIG);
            }
        }
        if let Nfs3Option::Some(mode) = attr.mode {
            sys::fchmod(fd.as_fd(), mode & 0o7777).map_err(io_err)?;
        }
        let (uid, gid) = self.owner_change(attr);
        if uid != u32::MAX || gid != u32::MAX {
            sys::lchownat(fd.as_fd(), c"", uid, gid).map_err(io_err)?;
        }
        if let Nfs3Option::Some(size) = attr.size {
            let file = File::from(fd.try_clone().map_err(io_err)?);
            file.set_len(size).map_err(io_err)?;
        }
        let (a, m) = (set_time(attr.atime), set_time_m(attr.mtime));
        if a.is_some() || m.is_some() {
            sys::lutimensat(fd.as_fd(), c"", a, m).map_err(io_err)?;
        }
        Ok(())
    }
}

/// The pre-operation attributes of a change (RFC 1813 `wcc_attr`).
pub(super) fn wcc_of(a: &fattr3) -> wcc_attr {
    wcc_attr {
        size: a.size,
        mtime: a.mtime,
        ctime: a.ctime,
    }
}

/// The ACCESS3 bits `caller` (after squashing) has on an object with attributes `attr`
/// by its mode bits, minus every change when `read_only` — what NFSv3's and NFSv4's
/// ACCESS answer and NFSv4's OPEN checks.
pub fn allowed(attr: &fattr3, caller: &Caller, read_only: bool) -> u32 {
    use nfs3_types::nfs3::{
        ACCESS3_DELETE, ACCESS3_EXECUTE, ACCESS3_EXTEND, ACCESS3_LOOKUP, ACCESS3_MODIFY,
        ACCESS3_READ,
    };
    let dir = attr.type_ == ftype3::NF3DIR;
    let bits = if caller.uid == 0 {
        // Root: read and write anything; execute only what some execute bit allows.
        0o6 | u32::from(dir || attr.mode & 0o111 != 0)
    } else if caller.uid == attr.uid {
        (attr.mode >> 6) & 7
    } else if caller.in_group(attr.gid) {
        (attr.mode >> 3) & 7
    } else {
        attr.mode & 7
    };
    let mut ok = 0;
    if bits & 4 != 0 {
        ok |= ACCESS3_READ;
    }
    if bits & 2 != 0 {
        ok |= ACCESS3_MODIFY | ACCESS3_EXTEND;
        if dir {
            ok |= ACCESS3_DELETE;
        }
    }
    if bits & 1 != 0 {
        ok |= if dir { ACCESS3_LOOKUP } else { ACCESS3_EXECUTE };
    }
    if read_only {
        ok &= !(ACCESS3_MODIFY | ACCESS3_EXTEND | ACCESS3_DELETE);
    }
    ok
}

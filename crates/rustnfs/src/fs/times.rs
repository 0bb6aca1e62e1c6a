//! Times outside NFSv3's range: `nfstime3` has 32 unsigned bits of seconds (1970 to
//! 2106), NFSv4's `nfstime4` 64 signed. SETATTR's other attributes go through
//! `sattr3` as for v3; a time it cannot carry is set here, by the same rules — the
//! change runs as the caller (so the kernel decides who may set which time), through
//! the object's directory and name (never following a symbolic link), or the export's
//! root descriptor for the root.

use std::os::fd::AsFd;

use nfs3_types::nfs3::nfsstat3;

use super::{DirFs, Fh, Loc, NfsResult, io_err};
use crate::sys::{self, SetTime};

impl DirFs {
    /// Sets the access and modification times (`None`: kept; `Some(None)`: the server's
    /// clock; `Some(Some((secs, nsecs)))`: that time).
    pub fn set_times(&self, fh: &Fh, atime: SetTime, mtime: SetTime) -> NfsResult<()> {
        if self.read_only() {
            return Err(nfsstat3::NFS3ERR_ROFS);
        }
        match self.locate(fh)? {
            Loc::Child { dir, name, .. } => {
                self.act(|| sys::lutimensat(dir.as_fd(), &name, atime, mtime).map_err(io_err))
            }
            Loc::Root(_) => {
                let (fd, _) = self.open_obj(fh, libc::O_RDONLY | libc::O_DIRECTORY)?;
                self.act(|| sys::lutimensat(fd.as_fd(), c"", atime, mtime).map_err(io_err))
            }
        }
    }
}

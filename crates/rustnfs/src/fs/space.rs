//! NFSv4.2's operations on a file's contents and space (RFC 7862): SEEK to data or a
//! hole, ALLOCATE and DEALLOCATE (fallocate), COPY within the export
//! (`copy_file_range`, so the kernel moves or shares the blocks). The same rules as
//! READ and WRITE: regular files only, the caller's read or write permission (mode bits
//! with the owner override), changes made as the caller, `--read-only` refusing them.

use std::os::fd::AsFd;

use nfs3_types::nfs3::nfsstat3;

use super::{DirFs, Fh, NfsResult, io_err};
use crate::sys;

/// The most bytes one COPY moves: a larger one is answered short and the client asks
/// for the rest (as `copy_file_range` itself may answer short), so one call never holds
/// a thread for long.
pub const COPY_MAX: u64 = 64 << 20;

impl DirFs {
    /// SEEK: the offset of the next data (`hole` false) or hole at or after `offset`;
    /// `None` when there is none (past the end: the client's eof).
    pub fn seek(&self, fh: &Fh, offset: u64, hole: bool) -> NfsResult<Option<u64>> {
        let file = self.file(fh, false)?;
        let st = sys::fstat(file.as_fd()).map_err(io_err)?;
        if !self.may_read(&self.fattr(&st)) {
            return Err(nfsstat3::NFS3ERR_ACCES);
        }
        let offset = i64::try_from(offset).map_err(|_| nfsstat3::NFS3ERR_INVAL)?;
        match sys::seek_data(file.as_fd(), offset, hole) {
            Ok(at) => Ok(Some(at)),
            Err(e) if e.raw_os_error() == Some(libc::ENXIO) => Ok(None),
            Err(e) => Err(io_err(e)),
        }
    }

    /// ALLOCATE (`punch` false: space reserved, the size grown to cover it) or
    /// DEALLOCATE (`punch`: a hole punched, the size kept) of `[offset, offset + len)`.
    pub fn allocate(&self, fh: &Fh, offset: u64, len: u64, punch: bool) -> NfsResult<()> {
        if self.read_only() {
            return Err(nfsstat3::NFS3ERR_ROFS);
        }
        let (Ok(offset), Ok(len)) = (i64::try_from(offset), i64::try_from(len)) else {
            return Err(nfsstat3::NFS3ERR_FBIG);
        };
        if len == 0 || offset.checked_add(len).is_none() {
            return Err(nfsstat3::NFS3ERR_INVAL);
        }
        let file = self.file(fh, true)?;
        let st = sys::fstat(file.as_fd()).map_err(io_err)?;
        if !self.may_write(&st) {
            return Err(nfsstat3::NFS3ERR_ACCES);
        }
        self.act(|| sys::fallocate(file.as_fd(), punch, offset, len).map_err(io_err))
    }

    /// COPY of `count` bytes (0: to the source's end) from `src` at `src_offset` to
    /// `dst` at `dst_offset`: the bytes copied (at most [`COPY_MAX`]; fewer at the
    /// source's end).
    pub fn copy_range(
        &self,
        src: &Fh,
        src_offset: u64,
        dst: &Fh,
        dst_offset: u64,
        count: u64,
    ) -> NfsResult<u64> {
        if self.read_only() {
            return Err(nfsstat3::NFS3ERR_ROFS);
        }
        let from = self.file(src, false)?;
        let to = self.file(dst, true)?;
        let (s, d) = (
            sys::fstat(from.as_fd()).map_err(io_err)?,
            sys::fstat(to.as_fd()).map_err(io_err)?,
        );
        if !self.may_read(&self.fattr(&s)) || !self.may_write(&d) {
            return Err(nfsstat3::NFS3ERR_ACCES);
        }
        if src_offset > s.size {
            return Err(nfsstat3::NFS3ERR_INVAL);
        }
        let want = match count {
            0 => s.size - src_offset,
            n => n.min(s.size - src_offset),
        }
        .min(COPY_MAX);
        let (Ok(mut from_at), Ok(mut to_at)) =
            (i64::try_from(src_offset), i64::try_from(dst_offset))
        else {
            return Err(nfsstat3::NFS3ERR_FBIG);
        };
        self.act(|| {
            let mut done = 0u64;
            while done < want {
                let n = sys::copy_file_range(
                    from.as_fd(),
                    &mut from_at,
                    to.as_fd(),
                    &mut to_at,
                    (want - done) as usize,
                )
                .map_err(io_err)?;
                if n == 0 {
                    break;
                }
                done += n as u64;
            }
            Ok(done)
        })
    }
}

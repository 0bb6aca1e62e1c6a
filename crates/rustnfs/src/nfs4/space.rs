//! NFSv4.2's operations on file contents (RFC 7862 §15): SEEK, ALLOCATE, DEALLOCATE and
//! COPY within the export — each a stateid check as READ's or WRITE's, then a call into
//! `DirFs` (which runs changes as the caller). Intra-server, synchronous COPY only:
//! a copy from another server is `NFS4ERR_NOTSUPP`, and an asynchronous one is done
//! at once and answered as synchronous, as the RFC allows.

use super::args::CopyArgs;
use super::proto::{self, Status};
use super::state::Stateid;
use super::xdr;
use super::{Ctx, Io, Nfs4, cur};

impl Nfs4 {
    /// SEEK: the next data or hole at or after `offset` (`NXIO` past the end; no data
    /// after it is `sr_eof` with the file's size).
    pub(super) fn seek(
        &self,
        cx: &Ctx<'_>,
        sid: &Stateid,
        offset: u64,
        hole: bool,
        out: &mut Vec<u8>,
    ) -> Result<(), Status> {
        let fh = cur(cx)?;
        self.check_io(cx, sid, &fh, Io::Read)?;
        let size = self.fs.attr(&fh).map_err(proto::from_v3)?.size;
        if offset >= size {
            return Err(proto::NXIO);
        }
        let found = self.fs.seek(&fh, offset, hole).map_err(proto::from_v3)?;
        let at = found.unwrap_or(size);
        xdr::bool(out, at >= size);
        xdr::u64(out, at);
        Ok(())
    }

    /// ALLOCATE (`punch` false) or DEALLOCATE (`punch`).
    pub(super) fn allocate(
        &self,
        cx: &Ctx<'_>,
        sid: &Stateid,
        offset: u64,
        length: u64,
        punch: bool,
    ) -> Result<(), Status> {
        let fh = cur(cx)?;
        self.check_io(cx, sid, &fh, Io::Write)?;
        self.fs
            .allocate(&fh, offset, length, punch)
            .map_err(proto::from_v3)
    }

    /// COPY from the saved filehandle to the current one: the bytes copied (short at
    /// the source's end and past `fs::COPY_MAX`), answered UNSTABLE with the write
    /// verifier, as WRITE is (the client COMMITs).
    pub(super) fn copy(&self, cx: &Ctx<'_>, a: &CopyArgs, out: &mut Vec<u8>) -> Result<(), Status> {
        let dst = cur(cx)?;
        let src = cx.saved.ok_or(proto::NOFILEHANDLE)?;
        if a.remote {
            return Err(proto::NOTSUPP);
        }
        self.check_io(cx, &a.src, &src, Io::Read)?;
        self.check_io(cx, &a.dst, &dst, Io::Write)?;
        if src == dst {
            let (s, d, n) = (a.src_offset, a.dst_offset, a.count.max(1));
            if s < d.saturating_add(n) && d < s.saturating_add(n) {
                return Err(proto::INVAL);
            }
        }
        let copied = self
            .fs
            .copy_range(&src, a.src_offset, &dst, a.dst_offset, a.count)
            .map_err(proto::from_v3)?;
        let _ = a.synchronous;
        xdr::u32(out, 0); // no wr_callback_id: done synchronously
        xdr::u64(out, copied);
        xdr::u32(out, 0); // UNSTABLE4
        xdr::fixed(out, &self.verf);
        xdr::bool(out, true); // cr_consecutive
        xdr::bool(out, true); // cr_synchronous
        Ok(())
    }
}

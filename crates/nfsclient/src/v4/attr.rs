//! `fattr4` as this client asks for it: the attributes [`ASKED`] names, decoded into
//! the crate's [`Attr`] (owners as the numbers AUTH_SYS servers send, `"1000"` or
//! `"1000@domain"`), and the handle when a READDIR entry carries one.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use nfs3_client::nfs3_types::nfs3::nfs_fh3;
use nfs3_client::nfs3_types::xdr_codec::Opaque;

use super::xdr::{Reply, ReplyError, attr};
use crate::{Attr, FileKind};

/// The attributes GETATTR asks for: what [`Attr`] holds.
pub(crate) const ASKED: [u32; 8] = [
    attr::TYPE,
    attr::SIZE,
    attr::FILEID,
    attr::MODE,
    attr::OWNER,
    attr::OWNER_GROUP,
    attr::TIME_METADATA,
    attr::TIME_MODIFY,
];

/// `filehandle` (RFC 7530 attribute 19), asked for beside [`ASKED`] by READDIR.
pub(crate) const FILEHANDLE: u32 = 19;

/// Longest file handle (RFC 7530 `NFS4_FHSIZE`).
pub(crate) const FH_MAX: usize = 128;

/// The attributes a reply's `fattr4` held, and the handle when it held one.
pub(crate) struct Decoded {
    pub attr: Option<Attr>,
    pub handle: Option<nfs_fh3>,
}

/// Reads one `fattr4` (bitmap and attribute list). Every attribute the bitmap sets must
/// be one this client asked for (it cannot skip an attribute whose length it does not
/// know); [`Attr`] is built when at least the type came back.
pub(crate) fn fattr4(r: &mut Reply<'_>) -> Result<Decoded, ReplyError> {
    let bits = r.bitmap()?;
    let list = r.opaque(64 << 10, "attribute list")?;
    let mut l = Reply::new(list, 0);
    let mut a = Attr {
        kind: FileKind::Other,
        mode: 0,
        size: 0,
        uid: 0,
        gid: 0,
        fileid: 0,
        mtime: UNIX_EPOCH,
        ctime: UNIX_EPOCH,
    };
    let mut handle = None;
    for n in 0..128u32 {
        if bits & (1u128 << n) == 0 {
            continue;
        }
        match n {
            attr::TYPE => a.kind = kind(l.u32("type")?),
            attr::SIZE => a.size = l.u64("size")?,
            FILEHANDLE => {
                let fh = l.opaque(FH_MAX, "filehandle")?;
                handle = Some(nfs_fh3 {
                    data: Opaque::owned(fh.to_vec()),
                });
            }
            attr::FILEID => a.fileid = l.u64("fileid")?,
            attr::MODE => a.mode = l.u32("mode")? & 0o7777,
            attr::OWNER => a.uid = owner(l.opaque(1024, "owner")?),
            attr::OWNER_GROUP => a.gid = owner(l.opaque(1024, "owner_group")?),
            attr::TIME_METADATA => a.ctime = time(&mut l)?,
            attr::TIME_MODIFY => a.mtime = time(&mut l)?,
            _ => {
                return Err(ReplyError::Bad(
                    "attribute bitmap (an attribute not asked for)",
                ));
            }
        }
    }
    if !l.at_end() {
        return Err(ReplyError::Bad(
            "attribute list (bytes after the last attribute)",
        ));
    }
    let typed = bits & (1u128 << attr::TYPE) != 0;
    Ok(Decoded {
        attr: typed.then_some(a),
        handle,
    })
}

/// `nfs_ftype4` → [`FileKind`].
fn kind(t: u32) -> FileKind {
    match t {
        1 => FileKind::File,
        2 => FileKind::Dir,
        5 => FileKind::Symlink,
        _ => FileKind::Other,
    }
}

/// An owner string as a number: `"1000"` or `"1000@domain"`; a name this client cannot
/// map is `nobody` (65534), as the Linux client shows unmapped owners.
fn owner(s: &[u8]) -> u32 {
    let s = std::str::from_utf8(s).unwrap_or("");
    let num = s.split_once('@').map_or(s, |(n, _)| n);
    num.parse().unwrap_or(65534)
}

/// `nfstime4`: 64-bit seconds, nanoseconds.
fn time(r: &mut Reply<'_>) -> Result<SystemTime, ReplyError> {
    let secs = r.u64("time")? as i64;
    let nsecs = r.u32("time")?;
    if nsecs >= 1_000_000_000 {
        return Err(ReplyError::Bad("time (nanoseconds)"));
    }
    let t = if secs >= 0 {
        UNIX_EPOCH.checked_add(Duration::new(secs as u64, nsecs))
    } else {
        UNIX_EPOCH
            .checked_sub(Duration::from_secs(secs.unsigned_abs()))
            .and_then(|t| t.checked_add(Duration::from_nanos(u64::from(nsecs))))
    };
    t.ok_or(ReplyError::Bad("time (out of range)"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::v4::xdr::Ops;

    fn encoded(bits: &[u32], list: &[u8]) -> Vec<u8> {
        let mut o = Ops::default();
        o.bitmap(bits).opaque(list);
        o.buf
    }

    #[test]
    fn a_getattr_reply_decodes_in_bit_order() {
        let mut l = Ops::default();
        l.u32(1)
            .u64(4096)
            .u64(77)
            .u32(0o100644)
            .opaque(b"1000@example.org");
        l.opaque(b"staff")
            .u64(1_700_000_000)
            .u32(5)
            .u64(1 << 32)
            .u32(0);
        let bits = [
            attr::TYPE,
            attr::SIZE,
            attr::FILEID,
            attr::MODE,
            attr::OWNER,
            attr::OWNER_GROUP,
            attr::TIME_METADATA,
            attr::TIME_MODIFY,
        ];
        let buf = encoded(&bits, &l.buf);
        let d = fattr4(&mut Reply::new(&buf, 0)).unwrap();
        let a = d.attr.unwrap();
        assert_eq!(a.kind, FileKind::File);
        assert_eq!(
            (a.size, a.fileid, a.mode, a.uid, a.gid),
            (4096, 77, 0o644, 1000, 65534)
        );
        assert_eq!(a.ctime, UNIX_EPOCH + Duration::new(1_700_000_000, 5));
        // 2^32 s (2106) round-trips: nfstime4 has 64-bit seconds.
        assert_eq!(a.mtime, UNIX_EPOCH + Duration::from_secs(1 << 32));
        assert!(d.handle.is_none());
    }

    #[test]
    fn unknown_attributes_and_leftovers_are_errors() {
        let buf = encoded(&[attr::TYPE, 2], &[0, 0, 0, 1, 0, 0, 0, 0]);
        assert!(fattr4(&mut Reply::new(&buf, 0)).is_err());
        let buf = encoded(&[attr::TYPE], &[0, 0, 0, 1, 0, 0, 0, 0]);
        assert!(fattr4(&mut Reply::new(&buf, 0)).is_err());
        let buf = encoded(
            &[attr::TIME_MODIFY],
            &[0, 0, 0, 0, 0, 0, 0, 1, 0x7f, 0xff, 0xff, 0xff],
        );
        assert!(fattr4(&mut Reply::new(&buf, 0)).is_err());
    }
}

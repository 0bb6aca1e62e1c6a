//! NFSv3 statuses: the one mapping from `io::Error` to `nfsstat3`, and the label each
//! status is recorded under in metrics.

use std::io;

use nfs3_types::nfs3::nfsstat3;

/// Maps an OS error to the NFSv3 status a client should see. The only place this mapping
/// lives, so every procedure answers the same error the same way.
pub fn nfsstat_from_io(e: &io::Error) -> nfsstat3 {
    use nfsstat3::*;
    match e.raw_os_error() {
        Some(libc::ENOENT) => NFS3ERR_NOENT,
        Some(libc::EPERM) => NFS3ERR_PERM,
        Some(libc::EACCES) => NFS3ERR_ACCES,
        Some(libc::EEXIST) => NFS3ERR_EXIST,
        // RESOLVE_BENEATH refuses an escape with EXDEV; so does a cross-device rename.
        Some(libc::EXDEV) => NFS3ERR_XDEV,
        Some(libc::ENOTDIR) => NFS3ERR_NOTDIR,
        Some(libc::EISDIR) => NFS3ERR_ISDIR,
        // A symlink where the server refuses to follow one: not a valid target.
        Some(libc::EINVAL) | Some(libc::ELOOP) => NFS3ERR_INVAL,
        Some(libc::EFBIG) => NFS3ERR_FBIG,
        Some(libc::ENOSPC) => NFS3ERR_NOSPC,
        Some(libc::EROFS) => NFS3ERR_ROFS,
        Some(libc::EMLINK) => NFS3ERR_MLINK,
        Some(libc::ENAMETOOLONG) => NFS3ERR_NAMETOOLONG,
        Some(libc::ENOTEMPTY) => NFS3ERR_NOTEMPTY,
        Some(libc::EDQUOT) => NFS3ERR_DQUOT,
        Some(libc::ESTALE) | Some(libc::EBADF) => NFS3ERR_STALE,
        Some(libc::ENOTSUP) | Some(libc::ENOSYS) => NFS3ERR_NOTSUPP,
        // Out of descriptors or a transient condition: ask the client to retry.
        Some(libc::EAGAIN) | Some(libc::EMFILE) | Some(libc::ENFILE) | Some(libc::EINTR) => {
            NFS3ERR_JUKEBOX
        }
        Some(libc::ENXIO) | Some(libc::ENODEV) => NFS3ERR_NXIO,
        _ => NFS3ERR_IO,
    }
}

/// The status label recorded in metrics: `ok` or the nfsstat3 name.
pub fn status_label(stat: nfsstat3) -> &'static str {
    use nfsstat3::*;
    match stat {
        NFS3_OK => "ok",
        NFS3ERR_PERM => "NFS3ERR_PERM",
        NFS3ERR_NOENT => "NFS3ERR_NOENT",
        NFS3ERR_IO => "NFS3ERR_IO",
        NFS3ERR_NXIO => "NFS3ERR_NXIO",
        NFS3ERR_ACCES => "NFS3ERR_ACCES",
        NFS3ERR_EXIST => "NFS3ERR_EXIST",
        NFS3ERR_XDEV => "NFS3ERR_XDEV",
        NFS3ERR_NODEV => "NFS3ERR_NODEV",
        NFS3ERR_NOTDIR => "NFS3ERR_NOTDIR",
        NFS3ERR_ISDIR => "NFS3ERR_ISDIR",
        NFS3ERR_INVAL => "NFS3ERR_INVAL",
        NFS3ERR_FBIG => "NFS3ERR_FBIG",
        NFS3ERR_NOSPC => "NFS3ERR_NOSPC",
        NFS3ERR_ROFS => "NFS3ERR_ROFS",
        NFS3ERR_MLINK => "NFS3ERR_MLINK",
        NFS3ERR_NAMETOOLONG => "NFS3ERR_NAMETOOLONG",
        NFS3ERR_NOTEMPTY => "NFS3ERR_NOTEMPTY",
        NFS3ERR_DQUOT => "NFS3ERR_DQUOT",
        NFS3ERR_STALE => "NFS3ERR_STALE",
        NFS3ERR_REMOTE => "NFS3ERR_REMOTE",
        NFS3ERR_BADHANDLE => "NFS3ERR_BADHANDLE",
        NFS3ERR_NOT_SYNC => "NFS3ERR_NOT_SYNC",
        NFS3ERR_BAD_COOKIE => "NFS3ERR_BAD_COOKIE",
        NFS3ERR_NOTSUPP => "NFS3ERR_NOTSUPP",
        NFS3ERR_TOOSMALL => "NFS3ERR_TOOSMALL",
        NFS3ERR_SERVERFAULT => "NFS3ERR_SERVERFAULT",
        NFS3ERR_BADTYPE => "NFS3ERR_BADTYPE",
        NFS3ERR_JUKEBOX => "NFS3ERR_JUKEBOX",
    }
}

/// The same label for a raw status word read off the wire.
pub fn status_label_raw(code: u32) -> &'static str {
    use nfsstat3::*;
    let stat = match code {
        0 => NFS3_OK,
        1 => NFS3ERR_PERM,
        2 => NFS3ERR_NOENT,
        5 => NFS3ERR_IO,
        6 => NFS3ERR_NXIO,
        13 => NFS3ERR_ACCES,
        17 => NFS3ERR_EXIST,
        18 => NFS3ERR_XDEV,
        19 => NFS3ERR_NODEV,
        20 => NFS3ERR_NOTDIR,
        21 => NFS3ERR_ISDIR,
        22 => NFS3ERR_INVAL,
        27 => NFS3ERR_FBIG,
        28 => NFS3ERR_NOSPC,
        30 => NFS3ERR_ROFS,
        31 => NFS3ERR_MLINK,
        63 => NFS3ERR_NAMETOOLONG,
        66 => NFS3ERR_NOTEMPTY,
        69 => NFS3ERR_DQUOT,
        70 => NFS3ERR_STALE,
        71 => NFS3ERR_REMOTE,
        10001 => NFS3ERR_BADHANDLE,
        10002 => NFS3ERR_NOT_SYNC,
        10003 => NFS3ERR_BAD_COOKIE,
        10004 => NFS3ERR_NOTSUPP,
        10005 => NFS3ERR_TOOSMALL,
        10006 => NFS3ERR_SERVERFAULT,
        10007 => NFS3ERR_BADTYPE,
        10008 => NFS3ERR_JUKEBOX,
        _ => return "NFS3ERR_UNKNOWN",
    };
    status_label(stat)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn maps_common_errors() {
        let e = |c| io::Error::from_raw_os_error(c);
        assert_eq!(nfsstat_from_io(&e(libc::ENOENT)), nfsstat3::NFS3ERR_NOENT);
        assert_eq!(nfsstat_from_io(&e(libc::ELOOP)), nfsstat3::NFS3ERR_INVAL);
        assert_eq!(nfsstat_from_io(&e(libc::EXDEV)), nfsstat3::NFS3ERR_XDEV);
        assert_eq!(
            nfsstat_from_io(&e(libc::ENOTEMPTY)),
            nfsstat3::NFS3ERR_NOTEMPTY
        );
        assert_eq!(
            nfsstat_from_io(&io::Error::other("x")),
            nfsstat3::NFS3ERR_IO
        );
        assert_eq!(status_label_raw(70), "NFS3ERR_STALE");
        assert_eq!(status_label_raw(0), "ok");
    }
}

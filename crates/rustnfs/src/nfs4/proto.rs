//! NFSv4.0 protocol numbers (RFC 7530 §13, §16 and its XDR, RFC 7531): operation codes
//! and their metric names, status codes and their labels, and the one mapping from the
//! NFSv3 statuses `DirFs` answers with to NFSv4 statuses.

use nfs3_types::nfs3::nfsstat3;

/// Operation codes (RFC 7531 `nfs_opnum4`), NFSv4.0's only.
pub mod op {
    pub const ACCESS: u32 = 3;
    pub const CLOSE: u32 = 4;
    pub const COMMIT: u32 = 5;
    pub const CREATE: u32 = 6;
    pub const DELEGPURGE: u32 = 7;
    pub const DELEGRETURN: u32 = 8;
    pub const GETATTR: u32 = 9;
    pub const GETFH: u32 = 10;
    pub const LINK: u32 = 11;
    pub const LOCK: u32 = 12;
    pub const LOCKT: u32 = 13;
    pub const LOCKU: u32 = 14;
    pub const LOOKUP: u32 = 15;
    pub const LOOKUPP: u32 = 16;
    pub const NVERIFY: u32 = 17;
    pub const OPEN: u32 = 18;
    pub const OPENATTR: u32 = 19;
    pub const OPEN_CONFIRM: u32 = 20;
    pub const OPEN_DOWNGRADE: u32 = 21;
    pub const PUTFH: u32 = 22;
    pub const PUTPUBFH: u32 = 23;
    pub const PUTROOTFH: u32 = 24;
    pub const READ: u32 = 25;
    pub const READDIR: u32 = 26;
    pub const READLINK: u32 = 27;
    pub const REMOVE: u32 = 28;
    pub const RENAME: u32 = 29;
    pub const RENEW: u32 = 30;
    pub const RESTOREFH: u32 = 31;
    pub const SAVEFH: u32 = 32;
    pub const SECINFO: u32 = 33;
    pub const SETATTR: u32 = 34;
    pub const SETCLIENTID: u32 = 35;
    pub const SETCLIENTID_CONFIRM: u32 = 36;
    pub const VERIFY: u32 = 37;
    pub const WRITE: u32 = 38;
    pub const RELEASE_LOCKOWNER: u32 = 39;
    pub const ILLEGAL: u32 = 10044;

    /// The metric name of an operation: `NFS4_READ`, `NFS4_ILLEGAL`, ...
    pub fn name(op: u32) -> &'static str {
        const NAMES: [&str; 37] = [
            "NFS4_ACCESS",
            "NFS4_CLOSE",
            "NFS4_COMMIT",
            "NFS4_CREATE",
            "NFS4_DELEGPURGE",
            "NFS4_DELEGRETURN",
            "NFS4_GETATTR",
            "NFS4_GETFH",
            "NFS4_LINK",
            "NFS4_LOCK",
            "NFS4_LOCKT",
            "NFS4_LOCKU",
            "NFS4_LOOKUP",
            "NFS4_LOOKUPP",
            "NFS4_NVERIFY",
            "NFS4_OPEN",
            "NFS4_OPENATTR",
            "NFS4_OPEN_CONFIRM",
            "NFS4_OPEN_DOWNGRADE",
            "NFS4_PUTFH",
            "NFS4_PUTPUBFH",
            "NFS4_PUTROOTFH",
            "NFS4_READ",
            "NFS4_READDIR",
            "NFS4_READLINK",
            "NFS4_REMOVE",
            "NFS4_RENAME",
            "NFS4_RENEW",
            "NFS4_RESTOREFH",
            "NFS4_SAVEFH",
            "NFS4_SECINFO",
            "NFS4_SETATTR",
            "NFS4_SETCLIENTID",
            "NFS4_SETCLIENTID_CONFIRM",
            "NFS4_VERIFY",
            "NFS4_WRITE",
            "NFS4_RELEASE_LOCKOWNER",
        ];
        (op as usize)
            .checked_sub(3)
            .and_then(|i| NAMES.get(i))
            .copied()
            .unwrap_or("NFS4_ILLEGAL")
    }
}

/// An `nfsstat4`.
pub type Status = u32;

pub const OK: Status = 0;
pub const PERM: Status = 1;
pub const NOENT: Status = 2;
pub const IO: Status = 5;
pub const NXIO: Status = 6;
pub const ACCESS: Status = 13;
pub const EXIST: Status = 17;
pub const XDEV: Status = 18;
pub const NOTDIR: Status = 20;
pub const ISDIR: Status = 21;
pub const INVAL: Status = 22;
pub const FBIG: Status = 27;
pub const NOSPC: Status = 28;
pub const ROFS: Status = 30;
pub const MLINK: Status = 31;
pub const NAMETOOLONG: Status = 63;
pub const NOTEMPTY: Status = 66;
pub const DQUOT: Status = 69;
pub const STALE: Status = 70;
pub const BADHANDLE: Status = 10001;
pub const BAD_COOKIE: Status = 10003;
pub const NOTSUPP: Status = 10004;
pub const TOOSMALL: Status = 10005;
pub const SERVERFAULT: Status = 10006;
pub const BADTYPE: Status = 10007;
pub const DELAY: Status = 10008;
pub const SAME: Status = 10009;
pub const DENIED: Status = 10010;
pub const EXPIRED: Status = 10011;
pub const LOCKED: Status = 10012;
pub const SHARE_DENIED: Status = 10015;
pub const RESOURCE: Status = 10018;
pub const MOVED: Status = 10019;
pub const NOFILEHANDLE: Status = 10020;
pub const MINOR_VERS_MISMATCH: Status = 10021;
pub const STALE_CLIENTID: Status = 10022;
pub const STALE_STATEID: Status = 10023;
pub const OLD_STATEID: Status = 10024;
pub const BAD_STATEID: Status = 10025;
pub const BAD_SEQID: Status = 10026;
pub const NOT_SAME: Status = 10027;
pub const SYMLINK: Status = 10029;
pub const RESTOREFH: Status = 10030;
pub const ATTRNOTSUPP: Status = 10032;
pub const NO_GRACE: Status = 10033;
pub const RECLAIM_BAD: Status = 10034;
pub const BADXDR: Status = 10036;
pub const LOCKS_HELD: Status = 10037;
pub const OPENMODE: Status = 10038;
pub const BADOWNER: Status = 10039;
pub const BADNAME: Status = 10041;
pub const OP_ILLEGAL: Status = 10044;

/// The NFSv4 status of an NFSv3 one (most share their numbers). `NOT_SYNC` (a v3
/// SETATTR guard) has no v4 twin and `REMOTE` no meaning here.
pub fn from_v3(s: nfsstat3) -> Status {
    use nfsstat3::*;
    match s {
        NFS3_OK => OK,
        NFS3ERR_PERM => PERM,
        NFS3ERR_NOENT => NOENT,
        NFS3ERR_IO | NFS3ERR_REMOTE => IO,
        NFS3ERR_NXIO | NFS3ERR_NODEV => NXIO,
        NFS3ERR_ACCES => ACCESS,
        NFS3ERR_EXIST => EXIST,
        NFS3ERR_XDEV => XDEV,
        NFS3ERR_NOTDIR => NOTDIR,
        NFS3ERR_ISDIR => ISDIR,
        NFS3ERR_INVAL | NFS3ERR_NOT_SYNC => INVAL,
        NFS3ERR_FBIG => FBIG,
        NFS3ERR_NOSPC => NOSPC,
        NFS3ERR_ROFS => ROFS,
        NFS3ERR_MLINK => MLINK,
        NFS3ERR_NAMETOOLONG => NAMETOOLONG,
        NFS3ERR_NOTEMPTY => NOTEMPTY,
        NFS3ERR_DQUOT => DQUOT,
        NFS3ERR_STALE => STALE,
        NFS3ERR_BADHANDLE => BADHANDLE,
        NFS3ERR_BAD_COOKIE => BAD_COOKIE,
        NFS3ERR_NOTSUPP => NOTSUPP,
        NFS3ERR_TOOSMALL => TOOSMALL,
        NFS3ERR_SERVERFAULT => SERVERFAULT,
        NFS3ERR_BADTYPE => BADTYPE,
        NFS3ERR_JUKEBOX => DELAY,
    }
}

/// The `status` label of a v4 status: `ok` or `NFS4ERR_…`.
pub fn label(s: Status) -> &'static str {
    match s {
        OK => "ok",
        PERM => "NFS4ERR_PERM",
        NOENT => "NFS4ERR_NOENT",
        IO => "NFS4ERR_IO",
        NXIO => "NFS4ERR_NXIO",
        ACCESS => "NFS4ERR_ACCESS",
        EXIST => "NFS4ERR_EXIST",
        XDEV => "NFS4ERR_XDEV",
        NOTDIR => "NFS4ERR_NOTDIR",
        ISDIR => "NFS4ERR_ISDIR",
        INVAL => "NFS4ERR_INVAL",
        FBIG => "NFS4ERR_FBIG",
        NOSPC => "NFS4ERR_NOSPC",
        ROFS => "NFS4ERR_ROFS",
        MLINK => "NFS4ERR_MLINK",
        NAMETOOLONG => "NFS4ERR_NAMETOOLONG",
        NOTEMPTY => "NFS4ERR_NOTEMPTY",
        DQUOT => "NFS4ERR_DQUOT",
        STALE => "NFS4ERR_STALE",
        BADHANDLE => "NFS4ERR_BADHANDLE",
        BAD_COOKIE => "NFS4ERR_BAD_COOKIE",
        NOTSUPP => "NFS4ERR_NOTSUPP",
        TOOSMALL => "NFS4ERR_TOOSMALL",
        SERVERFAULT => "NFS4ERR_SERVERFAULT",
        BADTYPE => "NFS4ERR_BADTYPE",
        DELAY => "NFS4ERR_DELAY",
        SAME => "NFS4ERR_SAME",
        DENIED => "NFS4ERR_DENIED",
        EXPIRED => "NFS4ERR_EXPIRED",
        LOCKED => "NFS4ERR_LOCKED",
        SHARE_DENIED => "NFS4ERR_SHARE_DENIED",
        RESOURCE => "NFS4ERR_RESOURCE",
        MOVED => "NFS4ERR_MOVED",
        NOFILEHANDLE => "NFS4ERR_NOFILEHANDLE",
        MINOR_VERS_MISMATCH => "NFS4ERR_MINOR_VERS_MISMATCH",
        STALE_CLIENTID => "NFS4ERR_STALE_CLIENTID",
        STALE_STATEID => "NFS4ERR_STALE_STATEID",
        OLD_STATEID => "NFS4ERR_OLD_STATEID",
        BAD_STATEID => "NFS4ERR_BAD_STATEID",
        BAD_SEQID => "NFS4ERR_BAD_SEQID",
        NOT_SAME => "NFS4ERR_NOT_SAME",
        SYMLINK => "NFS4ERR_SYMLINK",
        RESTOREFH => "NFS4ERR_RESTOREFH",
        ATTRNOTSUPP => "NFS4ERR_ATTRNOTSUPP",
        NO_GRACE => "NFS4ERR_NO_GRACE",
        RECLAIM_BAD => "NFS4ERR_RECLAIM_BAD",
        BADXDR => "NFS4ERR_BADXDR",
        LOCKS_HELD => "NFS4ERR_LOCKS_HELD",
        OPENMODE => "NFS4ERR_OPENMODE",
        BADOWNER => "NFS4ERR_BADOWNER",
        BADNAME => "NFS4ERR_BADNAME",
        OP_ILLEGAL => "NFS4ERR_OP_ILLEGAL",
        _ => "NFS4ERR_OTHER",
    }
}

/// Whether an operation that carries an owner's seqid consumes it with this result
/// (RFC 7530 §9.1.7: these errors leave the seqid where it was).
pub fn advances_seqid(s: Status) -> bool {
    !matches!(
        s,
        STALE_CLIENTID
            | STALE_STATEID
            | BAD_STATEID
            | BAD_SEQID
            | BADXDR
            | RESOURCE
            | NOFILEHANDLE
            | MOVED
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_statuses_and_the_v3_mapping() {
        assert_eq!(op::name(op::READ), "NFS4_READ");
        assert_eq!(op::name(op::RELEASE_LOCKOWNER), "NFS4_RELEASE_LOCKOWNER");
        assert_eq!(op::name(2), "NFS4_ILLEGAL");
        assert_eq!(op::name(40), "NFS4_ILLEGAL");
        assert_eq!(from_v3(nfsstat3::NFS3ERR_JUKEBOX), DELAY);
        assert_eq!(from_v3(nfsstat3::NFS3ERR_STALE), STALE);
        assert_eq!(label(BADXDR), "NFS4ERR_BADXDR");
        assert!(!advances_seqid(BAD_SEQID) && advances_seqid(NOENT));
    }
}

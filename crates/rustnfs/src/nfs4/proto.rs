//! NFSv4 protocol numbers (RFC 7531, RFC 8881, RFC 7862): operation codes
//! and their metric names, status codes and their labels, and the one mapping from the
//! NFSv3 statuses `DirFs` answers with to NFSv4 statuses.

use nfs3_types::nfs3::nfsstat3;

/// Operation codes (RFC 7531, RFC 8881 and RFC 7862 `nfs_opnum4`, with RFC 8276's
/// extended attributes).
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
    // NFSv4.1
    pub const BACKCHANNEL_CTL: u32 = 40;
    pub const BIND_CONN_TO_SESSION: u32 = 41;
    pub const EXCHANGE_ID: u32 = 42;
    pub const CREATE_SESSION: u32 = 43;
    pub const DESTROY_SESSION: u32 = 44;
    pub const FREE_STATEID: u32 = 45;
    pub const GET_DIR_DELEGATION: u32 = 46;
    pub const GETDEVICEINFO: u32 = 47;
    pub const GETDEVICELIST: u32 = 48;
    pub const LAYOUTCOMMIT: u32 = 49;
    pub const LAYOUTGET: u32 = 50;
    pub const LAYOUTRETURN: u32 = 51;
    pub const SECINFO_NO_NAME: u32 = 52;
    pub const SEQUENCE: u32 = 53;
    pub const SET_SSV: u32 = 54;
    pub const TEST_STATEID: u32 = 55;
    pub const WANT_DELEGATION: u32 = 56;
    pub const DESTROY_CLIENTID: u32 = 57;
    pub const RECLAIM_COMPLETE: u32 = 58;
    // NFSv4.2
    pub const ALLOCATE: u32 = 59;
    pub const COPY: u32 = 60;
    pub const COPY_NOTIFY: u32 = 61;
    pub const DEALLOCATE: u32 = 62;
    pub const IO_ADVISE: u32 = 63;
    pub const LAYOUTERROR: u32 = 64;
    pub const LAYOUTSTATS: u32 = 65;
    pub const OFFLOAD_CANCEL: u32 = 66;
    pub const OFFLOAD_STATUS: u32 = 67;
    pub const READ_PLUS: u32 = 68;
    pub const SEEK: u32 = 69;
    pub const WRITE_SAME: u32 = 70;
    pub const CLONE: u32 = 71;
    pub const GETXATTR: u32 = 72;
    pub const SETXATTR: u32 = 73;
    pub const LISTXATTRS: u32 = 74;
    pub const REMOVEXATTR: u32 = 75;
    pub const ILLEGAL: u32 = 10044;

    /// The operations of 4.1 and 4.2 this server does not implement (pNFS, delegations,
    /// state protection, server-to-server copy, READ_PLUS, CLONE, extended
    /// attributes): `NFS4ERR_NOTSUPP`.
    pub const NOT_IMPLEMENTED: [u32; 23] = [
        BACKCHANNEL_CTL,
        GET_DIR_DELEGATION,
        GETDEVICEINFO,
        GETDEVICELIST,
        LAYOUTCOMMIT,
        LAYOUTGET,
        LAYOUTRETURN,
        SET_SSV,
        WANT_DELEGATION,
        COPY_NOTIFY,
        IO_ADVISE,
        LAYOUTERROR,
        LAYOUTSTATS,
        OFFLOAD_CANCEL,
        OFFLOAD_STATUS,
        READ_PLUS,
        WRITE_SAME,
        CLONE,
        GETXATTR,
        SETXATTR,
        LISTXATTRS,
        REMOVEXATTR,
        OPENATTR,
    ];

    /// The highest operation number each minor version defines (0, 1, 2).
    pub const LAST: [u32; 3] = [RELEASE_LOCKOWNER, RECLAIM_COMPLETE, REMOVEXATTR];

    /// The metric name of an operation: `NFS4_READ`, `NFS4_ILLEGAL`, ...
    pub fn name(op: u32) -> &'static str {
        const NAMES: [&str; 73] = [
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
            "NFS4_BACKCHANNEL_CTL",
            "NFS4_BIND_CONN_TO_SESSION",
            "NFS4_EXCHANGE_ID",
            "NFS4_CREATE_SESSION",
            "NFS4_DESTROY_SESSION",
            "NFS4_FREE_STATEID",
            "NFS4_GET_DIR_DELEGATION",
            "NFS4_GETDEVICEINFO",
            "NFS4_GETDEVICELIST",
            "NFS4_LAYOUTCOMMIT",
            "NFS4_LAYOUTGET",
            "NFS4_LAYOUTRETURN",
            "NFS4_SECINFO_NO_NAME",
            "NFS4_SEQUENCE",
            "NFS4_SET_SSV",
            "NFS4_TEST_STATEID",
            "NFS4_WANT_DELEGATION",
            "NFS4_DESTROY_CLIENTID",
            "NFS4_RECLAIM_COMPLETE",
            "NFS4_ALLOCATE",
            "NFS4_COPY",
            "NFS4_COPY_NOTIFY",
            "NFS4_DEALLOCATE",
            "NFS4_IO_ADVISE",
            "NFS4_LAYOUTERROR",
            "NFS4_LAYOUTSTATS",
            "NFS4_OFFLOAD_CANCEL",
            "NFS4_OFFLOAD_STATUS",
            "NFS4_READ_PLUS",
            "NFS4_SEEK",
            "NFS4_WRITE_SAME",
            "NFS4_CLONE",
            "NFS4_GETXATTR",
            "NFS4_SETXATTR",
            "NFS4_LISTXATTRS",
            "NFS4_REMOVEXATTR",
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
// NFSv4.1 (RFC 8881) and 4.2 (RFC 7862)
pub const BADIOMODE: Status = 10049;
pub const BADLAYOUT: Status = 10050;
pub const BAD_SESSION_DIGEST: Status = 10051;
pub const BADSESSION: Status = 10052;
pub const BADSLOT: Status = 10053;
pub const COMPLETE_ALREADY: Status = 10054;
pub const CONN_NOT_BOUND_TO_SESSION: Status = 10055;
pub const SEQ_MISORDERED: Status = 10063;
pub const SEQUENCE_POS: Status = 10064;
pub const REQ_TOO_BIG: Status = 10065;
pub const REP_TOO_BIG: Status = 10066;
pub const REP_TOO_BIG_TO_CACHE: Status = 10067;
pub const RETRY_UNCACHED_REP: Status = 10068;
pub const TOO_MANY_OPS: Status = 10070;
pub const OP_NOT_IN_SESSION: Status = 10071;
pub const CLIENTID_BUSY: Status = 10074;
pub const SEQ_FALSE_RETRY: Status = 10076;
pub const BAD_HIGH_SLOT: Status = 10077;
pub const DEADSESSION: Status = 10078;
pub const ENCR_ALG_UNSUPP: Status = 10079;
pub const NOT_ONLY_OP: Status = 10081;
pub const WRONG_TYPE: Status = 10083;
pub const OFFLOAD_NO_REQS: Status = 10094;

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
        BADIOMODE => "NFS4ERR_BADIOMODE",
        BADLAYOUT => "NFS4ERR_BADLAYOUT",
        BAD_SESSION_DIGEST => "NFS4ERR_BAD_SESSION_DIGEST",
        BADSESSION => "NFS4ERR_BADSESSION",
        BADSLOT => "NFS4ERR_BADSLOT",
        COMPLETE_ALREADY => "NFS4ERR_COMPLETE_ALREADY",
        CONN_NOT_BOUND_TO_SESSION => "NFS4ERR_CONN_NOT_BOUND_TO_SESSION",
        SEQ_MISORDERED => "NFS4ERR_SEQ_MISORDERED",
        SEQUENCE_POS => "NFS4ERR_SEQUENCE_POS",
        REQ_TOO_BIG => "NFS4ERR_REQ_TOO_BIG",
        REP_TOO_BIG => "NFS4ERR_REP_TOO_BIG",
        REP_TOO_BIG_TO_CACHE => "NFS4ERR_REP_TOO_BIG_TO_CACHE",
        RETRY_UNCACHED_REP => "NFS4ERR_RETRY_UNCACHED_REP",
        TOO_MANY_OPS => "NFS4ERR_TOO_MANY_OPS",
        OP_NOT_IN_SESSION => "NFS4ERR_OP_NOT_IN_SESSION",
        CLIENTID_BUSY => "NFS4ERR_CLIENTID_BUSY",
        SEQ_FALSE_RETRY => "NFS4ERR_SEQ_FALSE_RETRY",
        BAD_HIGH_SLOT => "NFS4ERR_BAD_HIGH_SLOT",
        DEADSESSION => "NFS4ERR_DEADSESSION",
        ENCR_ALG_UNSUPP => "NFS4ERR_ENCR_ALG_UNSUPP",
        NOT_ONLY_OP => "NFS4ERR_NOT_ONLY_OP",
        WRONG_TYPE => "NFS4ERR_WRONG_TYPE",
        OFFLOAD_NO_REQS => "NFS4ERR_OFFLOAD_NO_REQS",
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
        assert_eq!(op::name(op::SEQUENCE), "NFS4_SEQUENCE");
        assert_eq!(op::name(op::REMOVEXATTR), "NFS4_REMOVEXATTR");
        assert_eq!(op::name(76), "NFS4_ILLEGAL");
        assert_eq!(from_v3(nfsstat3::NFS3ERR_JUKEBOX), DELAY);
        assert_eq!(from_v3(nfsstat3::NFS3ERR_STALE), STALE);
        assert_eq!(label(BADXDR), "NFS4ERR_BADXDR");
        assert!(!advances_seqid(BAD_SEQID) && advances_seqid(NOENT));
    }
}

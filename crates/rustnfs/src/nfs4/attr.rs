//! NFSv4 attributes (RFC 7530 §5): the `fattr4` this server answers with — exactly the
//! attributes asked that it supports, in attribute order — and the settable ones it
//! takes (size, mode, owner, owner_group, time_access_set, time_modify_set), turned
//! into the `sattr3` that `DirFs` applies, so v3 and v4 change files the same way.
//!
//! Owners are numeric strings both ways: `owner` is the uid in decimal ("1000") and
//! `owner_group` the gid, as Linux clients send and expect with AUTH_SYS
//! (`nfs4_disable_idmapping`, the client's default). A `1000@domain` form is accepted
//! on input (the domain ignored); a name that is not a number is `NFS4ERR_BADOWNER`:
//! the server has no user database to map it with.

use nfs3_types::nfs3::{FSSTAT3resok, Nfs3Option, fattr3, ftype3, nfstime3, sattr3};
use nfs3_types::nfs3::{set_atime, set_mtime};

use super::proto::{self, Status};
use super::xdr::{self, Bitmap, Dec};
use crate::fs::MAX_IO;
use crate::sys::SetTime;

pub const SUPPORTED_ATTRS: u32 = 0;
pub const TYPE: u32 = 1;
pub const FH_EXPIRE_TYPE: u32 = 2;
pub const CHANGE: u32 = 3;
pub const SIZE: u32 = 4;
pub const LINK_SUPPORT: u32 = 5;
pub const SYMLINK_SUPPORT: u32 = 6;
pub const NAMED_ATTR: u32 = 7;
pub const FSID: u32 = 8;
pub const UNIQUE_HANDLES: u32 = 9;
pub const LEASE_TIME: u32 = 10;
pub const RDATTR_ERROR: u32 = 11;
pub const CANSETTIME: u32 = 15;
pub const CASE_INSENSITIVE: u32 = 16;
pub const CASE_PRESERVING: u32 = 17;
pub const CHOWN_RESTRICTED: u32 = 18;
pub const FILEHANDLE: u32 = 19;
pub const FILEID: u32 = 20;
pub const FILES_AVAIL: u32 = 21;
pub const FILES_FREE: u32 = 22;
pub const FILES_TOTAL: u32 = 23;
pub const HOMOGENEOUS: u32 = 26;
pub const MAXFILESIZE: u32 = 27;
pub const MAXLINK: u32 = 28;
pub const MAXNAME: u32 = 29;
pub const MAXREAD: u32 = 30;
pub const MAXWRITE: u32 = 31;
pub const MODE: u32 = 33;
pub const NO_TRUNC: u32 = 34;
pub const NUMLINKS: u32 = 35;
pub const OWNER: u32 = 36;
pub const OWNER_GROUP: u32 = 37;
pub const RAWDEV: u32 = 41;
pub const SPACE_AVAIL: u32 = 42;
pub const SPACE_FREE: u32 = 43;
pub const SPACE_TOTAL: u32 = 44;
pub const SPACE_USED: u32 = 45;
pub const TIME_ACCESS: u32 = 47;
pub const TIME_ACCESS_SET: u32 = 48;
pub const TIME_DELTA: u32 = 51;
pub const TIME_METADATA: u32 = 52;
pub const TIME_MODIFY: u32 = 53;
pub const TIME_MODIFY_SET: u32 = 54;
pub const MOUNTED_ON_FILEID: u32 = 55;
/// NFSv4.1: the attributes EXCLUSIVE4_1 may set beside its verifier.
pub const SUPPATTR_EXCLCREAT: u32 = 75;
/// NFSv4.2: how `change` moves (RFC 7862 §12.2.3), and extended attributes (RFC 8276).
pub const CHANGE_ATTR_TYPE: u32 = 79;
pub const XATTR_SUPPORT: u32 = 82;

const fn mask(attrs: &[u32]) -> u128 {
    let mut m = 0u128;
    let mut i = 0;
    while i < attrs.len() {
        m |= 1u128 << attrs[i];
        i += 1;
    }
    m
}

/// The attributes this server supports in a minor version (`supported_attrs`).
pub fn supported(minor: u32) -> u128 {
    match minor {
        0 => SUPPORTED,
        1 => SUPPORTED | mask(&[SUPPATTR_EXCLCREAT]),
        _ => SUPPORTED | mask(&[SUPPATTR_EXCLCREAT, CHANGE_ATTR_TYPE, XATTR_SUPPORT]),
    }
}

/// Every NFSv4.0 attribute this server supports.
pub const SUPPORTED: u128 = mask(&[
    SUPPORTED_ATTRS,
    TYPE,
    FH_EXPIRE_TYPE,
    CHANGE,
    SIZE,
    LINK_SUPPORT,
    SYMLINK_SUPPORT,
    NAMED_ATTR,
    FSID,
    UNIQUE_HANDLES,
    LEASE_TIME,
    RDATTR_ERROR,
    CANSETTIME,
    CASE_INSENSITIVE,
    CASE_PRESERVING,
    CHOWN_RESTRICTED,
    FILEHANDLE,
    FILEID,
    FILES_AVAIL,
    FILES_FREE,
    FILES_TOTAL,
    HOMOGENEOUS,
    MAXFILESIZE,
    MAXLINK,
    MAXNAME,
    MAXREAD,
    MAXWRITE,
    MODE,
    NO_TRUNC,
    NUMLINKS,
    OWNER,
    OWNER_GROUP,
    RAWDEV,
    SPACE_AVAIL,
    SPACE_FREE,
    SPACE_TOTAL,
    SPACE_USED,
    TIME_ACCESS,
    TIME_ACCESS_SET,
    TIME_DELTA,
    TIME_METADATA,
    TIME_MODIFY,
    TIME_MODIFY_SET,
    MOUNTED_ON_FILEID,
]);

/// The attributes a client may set.
pub const SETTABLE: u128 = mask(&[
    SIZE,
    MODE,
    OWNER,
    OWNER_GROUP,
    TIME_ACCESS_SET,
    TIME_MODIFY_SET,
]);

/// Attributes that can only be set, never read (GETATTR of them is `INVAL`).
pub const WRITE_ONLY: u128 = mask(&[TIME_ACCESS_SET, TIME_MODIFY_SET]);

/// What EXCLUSIVE4_1 can set: the times hold its verifier (as EXCLUSIVE4's do).
pub const EXCLCREAT: u128 = SETTABLE & !WRITE_ONLY;

/// `change_attr_type4`: NFS4_CHANGE_TYPE_IS_TIME_METADATA (`change` is the ctime).
const CHANGE_IS_TIME_METADATA: u32 = 3;

/// Attributes that need the file system's statistics (one statvfs).
const FS_STATS: u128 = mask(&[
    FILES_AVAIL,
    FILES_FREE,
    FILES_TOTAL,
    SPACE_AVAIL,
    SPACE_FREE,
    SPACE_TOTAL,
]);

/// The longest name (one component) and the link count limit, as PATHCONF says in v3.
const MAXNAME_VALUE: u32 = 255;
const MAXLINK_VALUE: u32 = 65_000;

/// The `change` attribute: the ctime in nanoseconds (it moves with every change of the
/// object's data or metadata).
pub fn change(ctime: nfstime3) -> u64 {
    u64::from(ctime.seconds) * 1_000_000_000 + u64::from(ctime.nseconds)
}

fn nf4_type(t: ftype3) -> u32 {
    match t {
        ftype3::NF3REG => 1,
        ftype3::NF3DIR => 2,
        ftype3::NF3BLK => 3,
        ftype3::NF3CHR => 4,
        ftype3::NF3LNK => 5,
        ftype3::NF3SOCK => 6,
        ftype3::NF3FIFO => 7,
    }
}

fn time(out: &mut Vec<u8>, t: nfstime3) {
    xdr::u64(out, u64::from(t.seconds));
    xdr::u32(out, t.nseconds);
}

/// An `nfstime4` of 64-bit signed seconds.
fn time64(out: &mut Vec<u8>, (secs, nsecs): (i64, u32)) {
    xdr::u64(out, secs as u64);
    xdr::u32(out, nsecs);
}

/// A time as `nfstime3` carries it, if it can: 0 to 2^32 − 1 seconds.
pub fn fits_v3((secs, nsecs): (i64, u32)) -> Option<nfstime3> {
    Some(nfstime3 {
        seconds: u32::try_from(secs).ok()?,
        nseconds: nsecs,
    })
}

/// One object as attributes are taken from: its v3 attributes and, when it is part of
/// the export, its handle's wire form.
pub struct Obj<'a> {
    pub attr: &'a fattr3,
    pub fh: Option<[u8; crate::fs::handle::WIRE_LEN]>,
    /// The server's lease, in seconds (`lease_time`).
    pub lease: u32,
    /// The COMPOUND's minor version (which attributes exist).
    pub minor: u32,
    /// Access, modification and change times with all their bits, when `attr`'s (32
    /// unsigned bits of seconds) cannot hold them.
    pub times: Option<[(i64, u32); 3]>,
}

impl Obj<'_> {
    /// Whether `attr`'s times may have been cut to fit `nfstime3` (before 1970 or after
    /// 2106): then the caller looks them up whole.
    pub fn times_cut(attr: &fattr3) -> bool {
        [attr.atime, attr.mtime, attr.ctime]
            .iter()
            .any(|t| t.seconds == 0 || t.seconds == u32::MAX)
    }
}

/// Appends the `fattr4` of `obj` for the attributes in `want` this server supports
/// (write-only ones left out; the caller refuses them first where the RFC says so);
/// `stats` is asked for the file system's statistics only when one of them is wanted.
pub fn encode(
    out: &mut Vec<u8>,
    want: Bitmap,
    obj: &Obj<'_>,
    stats: impl FnOnce() -> Option<FSSTAT3resok>,
) {
    let supported = supported(obj.minor);
    let mut bits = want.bits & supported & !WRITE_ONLY;
    if obj.fh.is_none() {
        bits &= !(1u128 << FILEHANDLE);
    }
    let st = if bits & FS_STATS != 0 { stats() } else { None };
    if st.is_none() {
        bits &= !FS_STATS;
    }
    let a = obj.attr;
    let mut v = Vec::with_capacity(256);
    for n in 0..128u32 {
        if bits & (1u128 << n) == 0 {
            continue;
        }
        match n {
            SUPPORTED_ATTRS => xdr::bitmap(&mut v, supported),
            TYPE => xdr::u32(&mut v, nf4_type(a.type_)),
            // FH4_PERSISTENT: handles survive restarts (see `fs::handle`).
            FH_EXPIRE_TYPE => xdr::u32(&mut v, 0),
            CHANGE => xdr::u64(&mut v, change(a.ctime)),
            SIZE => xdr::u64(&mut v, a.size),
            LINK_SUPPORT | SYMLINK_SUPPORT | UNIQUE_HANDLES | CANSETTIME | CASE_PRESERVING
            | CHOWN_RESTRICTED | HOMOGENEOUS | NO_TRUNC => xdr::bool(&mut v, true),
            NAMED_ATTR | CASE_INSENSITIVE => xdr::bool(&mut v, false),
            FSID => {
                xdr::u64(&mut v, a.fsid >> 32);
                xdr::u64(&mut v, a.fsid & 0xffff_ffff);
            }
            LEASE_TIME => xdr::u32(&mut v, obj.lease),
            RDATTR_ERROR => xdr::u32(&mut v, proto::OK),
            FILEHANDLE => xdr::opaque(&mut v, &obj.fh.unwrap_or_default()),
            FILEID | MOUNTED_ON_FILEID => xdr::u64(&mut v, a.fileid),
            FILES_AVAIL => xdr::u64(&mut v, st.as_ref().map_or(0, |s| s.afiles)),
            FILES_FREE => xdr::u64(&mut v, st.as_ref().map_or(0, |s| s.ffiles)),
            FILES_TOTAL => xdr::u64(&mut v, st.as_ref().map_or(0, |s| s.tfiles)),
            MAXFILESIZE => xdr::u64(&mut v, i64::MAX as u64),
            MAXLINK => xdr::u32(&mut v, MAXLINK_VALUE),
            MAXNAME => xdr::u32(&mut v, MAXNAME_VALUE),
            MAXREAD | MAXWRITE => xdr::u64(&mut v, u64::from(MAX_IO)),
            MODE => xdr::u32(&mut v, a.mode & 0o7777),
            NUMLINKS => xdr::u32(&mut v, a.nlink),
            OWNER => xdr::opaque(&mut v, a.uid.to_string().as_bytes()),
            OWNER_GROUP => xdr::opaque(&mut v, a.gid.to_string().as_bytes()),
            RAWDEV => {
                xdr::u32(&mut v, a.rdev.specdata1);
                xdr::u32(&mut v, a.rdev.specdata2);
            }
            SPACE_AVAIL => xdr::u64(&mut v, st.as_ref().map_or(0, |s| s.abytes)),
            SPACE_FREE => xdr::u64(&mut v, st.as_ref().map_or(0, |s| s.fbytes)),
            SPACE_TOTAL => xdr::u64(&mut v, st.as_ref().map_or(0, |s| s.tbytes)),
            SPACE_USED => xdr::u64(&mut v, a.used),
            TIME_ACCESS => match obj.times {
                Some(t) => time64(&mut v, t[0]),
                None => time(&mut v, a.atime),
            },
            TIME_DELTA => time(
                &mut v,
                nfstime3 {
                    seconds: 0,
                    nseconds: 1,
                },
            ),
            TIME_METADATA => match obj.times {
                Some(t) => time64(&mut v, t[2]),
                None => time(&mut v, a.ctime),
            },
            TIME_MODIFY => match obj.times {
                Some(t) => time64(&mut v, t[1]),
                None => time(&mut v, a.mtime),
            },
            SUPPATTR_EXCLCREAT => xdr::bitmap(&mut v, EXCLCREAT),
            CHANGE_ATTR_TYPE => xdr::u32(&mut v, CHANGE_IS_TIME_METADATA),
            XATTR_SUPPORT => xdr::bool(&mut v, false),
            _ => unreachable_attr(&mut bits, n),
        }
    }
    xdr::bitmap(out, bits);
    xdr::opaque(out, &v);
}

/// A supported attribute without an encoder would be a bug; it is left out of the
/// answer rather than sent wrong.
fn unreachable_attr(bits: &mut u128, n: u32) {
    tracing::error!("nfs4: no encoder for supported attribute {n}");
    *bits &= !(1u128 << n);
}

/// What a client asked to set: the v3 form `DirFs` applies, the times `sattr3` cannot
/// carry (access, modification: before 1970, after 2106), and the bitmap of what it
/// named (the `attrsset` of a reply that applied it all).
pub struct Settable {
    pub sattr: sattr3,
    pub wide: (SetTime, SetTime),
    pub mask: u128,
}

/// Decodes a `fattr4` to set: only [`SETTABLE`] attributes, each once, in order, the
/// values exactly filling their opaque. Unsupported attributes are `ATTRNOTSUPP`,
/// read-only ones `INVAL`, undecodable values `BADXDR`, non-numeric owners `BADOWNER`.
pub fn decode_settable(mask: Bitmap, vals: &[u8]) -> Result<Settable, Status> {
    if mask.beyond || mask.bits & !supported(2) != 0 {
        return Err(proto::ATTRNOTSUPP);
    }
    if mask.bits & !SETTABLE != 0 {
        return Err(proto::INVAL);
    }
    let mut d = Dec::new(vals);
    let bad = |_| proto::BADXDR;
    let mut s = sattr3::default();
    let mut wide: (SetTime, SetTime) = (None, None);
    for n in 0..128u32 {
        if !mask.has(n) {
            continue;
        }
        match n {
            SIZE => s.size = Nfs3Option::Some(d.u64().map_err(bad)?),
            MODE => {
                let m = d.u32().map_err(bad)?;
                if m > 0o7777 {
                    return Err(proto::INVAL);
                }
                s.mode = Nfs3Option::Some(m);
            }
            OWNER => {
                s.uid = Nfs3Option::Some(numeric_owner(d.opaque(xdr::OPAQUE_LIMIT).map_err(bad)?)?)
            }
            OWNER_GROUP => {
                s.gid = Nfs3Option::Some(numeric_owner(d.opaque(xdr::OPAQUE_LIMIT).map_err(bad)?)?)
            }
            TIME_ACCESS_SET => match settime(&mut d)? {
                None => s.atime = set_atime::SET_TO_SERVER_TIME,
                Some(t) => match fits_v3(t) {
                    Some(t3) => s.atime = set_atime::SET_TO_CLIENT_TIME(t3),
                    None => wide.0 = Some(Some(t)),
                },
            },
            TIME_MODIFY_SET => match settime(&mut d)? {
                None => s.mtime = set_mtime::SET_TO_SERVER_TIME,
                Some(t) => match fits_v3(t) {
                    Some(t3) => s.mtime = set_mtime::SET_TO_CLIENT_TIME(t3),
                    None => wide.1 = Some(Some(t)),
                },
            },
            _ => return Err(proto::INVAL),
        }
    }
    if !d.at_end() {
        return Err(proto::BADXDR);
    }
    Ok(Settable {
        sattr: s,
        wide,
        mask: mask.bits,
    })
}

/// A `settime4`: `None` for the server's time (SET_TO_SERVER_TIME4), else the client's
/// (SET_TO_CLIENT_TIME4): 64-bit signed seconds, nanoseconds below 10^9 (`INVAL`).
fn settime(d: &mut Dec<'_>) -> Result<Option<(i64, u32)>, Status> {
    match d.u32().map_err(|_| proto::BADXDR)? {
        0 => Ok(None),
        1 => {
            let secs = d.u64().map_err(|_| proto::BADXDR)? as i64;
            let nsecs = d.u32().map_err(|_| proto::BADXDR)?;
            if nsecs >= 1_000_000_000 {
                return Err(proto::INVAL);
            }
            Ok(Some((secs, nsecs)))
        }
        _ => Err(proto::BADXDR),
    }
}

/// `"1000"` or `"1000@domain"` → 1000; anything else is `BADOWNER`.
pub fn numeric_owner(s: &[u8]) -> Result<u32, Status> {
    let num = s.split(|&b| b == b'@').next().unwrap_or_default();
    if num.is_empty() || num.len() > 10 || !num.iter().all(u8::is_ascii_digit) {
        return Err(proto::BADOWNER);
    }
    std::str::from_utf8(num)
        .ok()
        .and_then(|n| n.parse().ok())
        .ok_or(proto::BADOWNER)
}

/// VERIFY/NVERIFY: whether the client's `fattr4` equals the object's for the same
/// attributes (compared in their XDR form, as the RFC defines it). Unsupported
/// attributes are `ATTRNOTSUPP`; `rdattr_error` and write-only ones `INVAL`.
pub fn same(
    mask: Bitmap,
    vals: &[u8],
    obj: &Obj<'_>,
    stats: impl FnOnce() -> Option<FSSTAT3resok>,
) -> Result<bool, Status> {
    if mask.beyond || mask.bits & !supported(obj.minor) != 0 {
        return Err(proto::ATTRNOTSUPP);
    }
    if mask.bits & (WRITE_ONLY | (1u128 << RDATTR_ERROR)) != 0 {
        return Err(proto::INVAL);
    }
    let mut ours = Vec::new();
    encode(&mut ours, mask, obj, stats);
    let mut d = Dec::new(&ours);
    let answered = d.bitmap().map_err(|_| proto::SERVERFAULT)?;
    let ours_vals = d.opaque(usize::MAX).map_err(|_| proto::SERVERFAULT)?;
    if answered.bits != mask.bits {
        // Something asked could not be read (the file system's statistics).
        return Err(proto::SERVERFAULT);
    }
    Ok(ours_vals == vals)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn owners_are_numeric() {
        assert_eq!(numeric_owner(b"1000"), Ok(1000));
        assert_eq!(numeric_owner(b"0@example.org"), Ok(0));
        assert_eq!(numeric_owner(b"alice"), Err(proto::BADOWNER));
        assert_eq!(numeric_owner(b""), Err(proto::BADOWNER));
        assert_eq!(numeric_owner(b"99999999999"), Err(proto::BADOWNER));
    }

    #[test]
    fn settable_attributes_decode_strictly() {
        let bm = |bits: u128| Bitmap {
            bits,
            beyond: false,
        };
        let mut v = Vec::new();
        xdr::u64(&mut v, 5);
        xdr::u32(&mut v, 0o640);
        let s = decode_settable(bm((1 << SIZE) | (1 << MODE)), &v).unwrap();
        assert!(matches!(s.sattr.size, Nfs3Option::Some(5)));
        assert!(matches!(s.sattr.mode, Nfs3Option::Some(0o640)));
        // Short values, extra values, read-only and unknown attributes.
        assert_eq!(
            decode_settable(bm((1 << SIZE) | (1 << MODE)), &v[..8]).err(),
            Some(proto::BADXDR)
        );
        assert_eq!(
            decode_settable(bm(1 << SIZE), &v).err(),
            Some(proto::BADXDR)
        );
        assert_eq!(
            decode_settable(bm(1 << TYPE), &[]).err(),
            Some(proto::INVAL)
        );
        assert_eq!(
            decode_settable(bm(1 << 12), &[]).err(),
            Some(proto::ATTRNOTSUPP)
        );
        let mut o = Vec::new();
        xdr::opaque(&mut o, b"bob");
        assert_eq!(
            decode_settable(bm(1 << OWNER), &o).err(),
            Some(proto::BADOWNER)
        );
        // A client time beyond NFSv3's range goes apart, whole; the server's clock as
        // itself; nanoseconds past a second are INVAL.
        let mut t = Vec::new();
        xdr::u32(&mut t, 1);
        xdr::u64(&mut t, 1 << 32);
        xdr::u32(&mut t, 5);
        xdr::u32(&mut t, 0);
        let s = decode_settable(bm((1 << TIME_MODIFY_SET) | (1 << TIME_ACCESS_SET)), &t)
            .unwrap_or_else(|_| panic!("decodes"));
        assert_eq!(s.wide, (Some(Some((1 << 32, 5))), None));
        assert!(matches!(s.sattr.atime, set_atime::DONT_CHANGE));
        assert!(matches!(s.sattr.mtime, set_mtime::SET_TO_SERVER_TIME));
        let mut t = Vec::new();
        xdr::u32(&mut t, 0);
        xdr::u32(&mut t, 1);
        xdr::u64(&mut t, 1 << 32);
        xdr::u32(&mut t, 5);
        let s = decode_settable(bm((1 << TIME_MODIFY_SET) | (1 << TIME_ACCESS_SET)), &t)
            .unwrap_or_else(|_| panic!("decodes"));
        assert!(matches!(s.sattr.atime, set_atime::SET_TO_SERVER_TIME));
        assert!(matches!(s.sattr.mtime, set_mtime::DONT_CHANGE));
        assert_eq!(s.wide, (None, Some(Some((1 << 32, 5)))));
        let mut t = Vec::new();
        xdr::u32(&mut t, 1);
        xdr::u64(&mut t, 1);
        xdr::u32(&mut t, 1_000_000_000);
        assert_eq!(
            decode_settable(bm(1 << TIME_MODIFY_SET), &t).err(),
            Some(proto::INVAL)
        );
    }
}

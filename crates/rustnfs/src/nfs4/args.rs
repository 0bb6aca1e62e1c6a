//! COMPOUND arguments decoded into [`Op`]s (RFC 7531's `nfs_argop4`), each field
//! bounded (see `xdr`). Everything borrows from the record: decoding allocates only the
//! list of operations, itself capped at [`MAX_OPS`].

use super::proto::op;
use super::state::Stateid;
use super::xdr::{self, Bitmap, Dec, Decoded, FH_MAX, OPAQUE_LIMIT};

/// Most operations in one COMPOUND (a Linux client sends under 10; Ganesha caps at 100).
/// More is `NFS4ERR_RESOURCE`, NFSv4.0's answer to a COMPOUND too large to process.
pub const MAX_OPS: u32 = 128;
/// Longest COMPOUND tag (it is echoed in the reply).
pub const TAG_MAX: usize = 1024;

/// A `fattr4` as sent: its bitmap and the undecoded values (decoded by `attr`, which
/// knows each attribute's type).
#[derive(Debug, Clone, Copy)]
pub struct Fattr<'a> {
    pub mask: Bitmap,
    pub vals: &'a [u8],
}

/// An `open_owner4` or `lock_owner4`.
#[derive(Debug, Clone, Copy)]
pub struct Owner<'a> {
    pub clientid: u64,
    pub owner: &'a [u8],
}

/// CREATE's object type (`createtype4`).
#[derive(Debug, Clone, Copy)]
pub enum CreateKind<'a> {
    Link(&'a [u8]),
    Device {
        block: bool,
        major: u32,
        minor: u32,
    },
    Socket,
    Fifo,
    Dir,
    /// Any other type (regular files are made by OPEN): `NFS4ERR_BADTYPE`.
    Other,
}

/// OPEN's `createhow4`, when it creates.
#[derive(Debug, Clone, Copy)]
pub enum How<'a> {
    Unchecked(Fattr<'a>),
    Guarded(Fattr<'a>),
    Exclusive([u8; 8]),
}

/// OPEN's `open_claim4`.
#[derive(Debug, Clone, Copy)]
pub enum Claim<'a> {
    Null(&'a [u8]),
    Previous,
    DelegateCur,
    DelegatePrev,
}

#[derive(Debug, Clone, Copy)]
pub struct OpenArgs<'a> {
    pub seqid: u32,
    pub access: u32,
    pub deny: u32,
    pub owner: Owner<'a>,
    pub create: Option<How<'a>>,
    pub claim: Claim<'a>,
}

/// LOCK's `locker4`.
#[derive(Debug, Clone, Copy)]
pub enum Locker<'a> {
    New {
        open_seqid: u32,
        open_stateid: Stateid,
        lock_seqid: u32,
        owner: Owner<'a>,
    },
    Existing {
        stateid: Stateid,
        seqid: u32,
    },
}

/// One operation with its arguments.
#[derive(Debug, Clone, Copy)]
pub enum Op<'a> {
    Access(u32),
    Close {
        seqid: u32,
        stateid: Stateid,
    },
    Commit,
    Create {
        kind: CreateKind<'a>,
        name: &'a [u8],
        attrs: Fattr<'a>,
    },
    DelegPurge,
    DelegReturn,
    Getattr(Bitmap),
    Getfh,
    Link(&'a [u8]),
    Lock {
        write: bool,
        reclaim: bool,
        offset: u64,
        length: u64,
        locker: Locker<'a>,
    },
    Lockt {
        write: bool,
        offset: u64,
        length: u64,
        owner: Owner<'a>,
    },
    Locku {
        seqid: u32,
        stateid: Stateid,
        offset: u64,
        length: u64,
    },
    Lookup(&'a [u8]),
    Lookupp,
    Nverify(Fattr<'a>),
    Open(OpenArgs<'a>),
    Openattr,
    OpenConfirm {
        stateid: Stateid,
        seqid: u32,
    },
    OpenDowngrade {
        stateid: Stateid,
        seqid: u32,
        access: u32,
        deny: u32,
    },
    Putfh(&'a [u8]),
    Putpubfh,
    Putrootfh,
    Read {
        stateid: Stateid,
        offset: u64,
        count: u32,
    },
    Readdir {
        cookie: u64,
        maxcount: u32,
        attrs: Bitmap,
    },
    Readlink,
    Remove(&'a [u8]),
    Rename {
        old: &'a [u8],
        new: &'a [u8],
    },
    Renew(u64),
    Restorefh,
    Savefh,
    Secinfo(&'a [u8]),
    Setattr {
        stateid: Stateid,
        attrs: Fattr<'a>,
    },
    Setclientid {
        verf: [u8; 8],
        id: &'a [u8],
    },
    SetclientidConfirm {
        clientid: u64,
        verf: [u8; 8],
    },
    Verify(Fattr<'a>),
    Write {
        stateid: Stateid,
        offset: u64,
        stable: u32,
        data: &'a [u8],
    },
    ReleaseLockowner(Owner<'a>),
    /// An operation number NFSv4.0 does not define: `NFS4ERR_OP_ILLEGAL`.
    Illegal,
}

impl Op<'_> {
    /// The operation number its result carries (`OP_ILLEGAL` for an illegal one).
    pub fn code(&self) -> u32 {
        match self {
            Op::Access(_) => op::ACCESS,
            Op::Close { .. } => op::CLOSE,
            Op::Commit => op::COMMIT,
            Op::Create { .. } => op::CREATE,
            Op::DelegPurge => op::DELEGPURGE,
            Op::DelegReturn => op::DELEGRETURN,
            Op::Getattr(_) => op::GETATTR,
            Op::Getfh => op::GETFH,
            Op::Link(_) => op::LINK,
            Op::Lock { .. } => op::LOCK,
            Op::Lockt { .. } => op::LOCKT,
            Op::Locku { .. } => op::LOCKU,
            Op::Lookup(_) => op::LOOKUP,
            Op::Lookupp => op::LOOKUPP,
            Op::Nverify(_) => op::NVERIFY,
            Op::Open(_) => op::OPEN,
            Op::Openattr => op::OPENATTR,
            Op::OpenConfirm { .. } => op::OPEN_CONFIRM,
            Op::OpenDowngrade { .. } => op::OPEN_DOWNGRADE,
            Op::Putfh(_) => op::PUTFH,
            Op::Putpubfh => op::PUTPUBFH,
            Op::Putrootfh => op::PUTROOTFH,
            Op::Read { .. } => op::READ,
            Op::Readdir { .. } => op::READDIR,
            Op::Readlink => op::READLINK,
            Op::Remove(_) => op::REMOVE,
            Op::Rename { .. } => op::RENAME,
            Op::Renew(_) => op::RENEW,
            Op::Restorefh => op::RESTOREFH,
            Op::Savefh => op::SAVEFH,
            Op::Secinfo(_) => op::SECINFO,
            Op::Setattr { .. } => op::SETATTR,
            Op::Setclientid { .. } => op::SETCLIENTID,
            Op::SetclientidConfirm { .. } => op::SETCLIENTID_CONFIRM,
            Op::Verify(_) => op::VERIFY,
            Op::Write { .. } => op::WRITE,
            Op::ReleaseLockowner(_) => op::RELEASE_LOCKOWNER,
            Op::Illegal => op::ILLEGAL,
        }
    }
}

/// A COMPOUND's header and operations as far as they decode.
pub struct Compound<'a> {
    pub tag: &'a [u8],
    pub ops: Vec<Op<'a>>,
    /// The operation number of the first operation that did not decode (its result is
    /// `NFS4ERR_BADXDR`, after the ones before it ran).
    pub bad: Option<u32>,
}

/// Why a COMPOUND has no operations to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused<'a> {
    /// The header does not decode: `NFS4ERR_BADXDR`, no results.
    BadXdr,
    /// A minor version other than 0: `NFS4ERR_MINOR_VERS_MISMATCH` (the tag echoed).
    MinorVersion(&'a [u8]),
    /// More than [`MAX_OPS`] operations: `NFS4ERR_RESOURCE` (the tag echoed).
    TooMany(&'a [u8]),
}

/// Decodes a COMPOUND's arguments.
pub fn decode(buf: &[u8]) -> Result<Compound<'_>, Refused<'_>> {
    let mut d = Dec::new(buf);
    let tag = d.opaque(TAG_MAX).map_err(|_| Refused::BadXdr)?;
    let minorversion = d.u32().map_err(|_| Refused::BadXdr)?;
    if minorversion != 0 {
        return Err(Refused::MinorVersion(tag));
    }
    let n = d.u32().map_err(|_| Refused::BadXdr)?;
    if n > MAX_OPS {
        return Err(Refused::TooMany(tag));
    }
    let mut ops = Vec::with_capacity(n as usize);
    let mut bad = None;
    for _ in 0..n {
        let Ok(code) = d.u32() else {
            bad = Some(op::ILLEGAL);
            break;
        };
        match one(code, &mut d) {
            Ok(op) => {
                let illegal = matches!(op, Op::Illegal);
                ops.push(op);
                if illegal {
                    break;
                }
            }
            Err(_) => {
                bad = Some(code);
                break;
            }
        }
    }
    if bad.is_none() && ops.len() == n as usize && !d.at_end() {
        // Bytes after the last operation: the COMPOUND is not what it says it is.
        return Err(Refused::BadXdr);
    }
    Ok(Compound { tag, ops, bad })
}

fn stateid(d: &mut Dec<'_>) -> Decoded<Stateid> {
    Ok(Stateid {
        seqid: d.u32()?,
        other: d.fixed()?,
    })
}

fn fattr<'a>(d: &mut Dec<'a>) -> Decoded<Fattr<'a>> {
    Ok(Fattr {
        mask: d.bitmap()?,
        vals: d.string()?,
    })
}

fn owner<'a>(d: &mut Dec<'a>) -> Decoded<Owner<'a>> {
    Ok(Owner {
        clientid: d.u64()?,
        owner: d.opaque(OPAQUE_LIMIT)?,
    })
}

/// A `nfs_lock_type4`: READ_LT, WRITE_LT, READW_LT, WRITEW_LT → whether it is a write
/// lock (the blocking variants are polled by the client in NFSv4.0).
fn lock_type(d: &mut Dec<'_>) -> Decoded<bool> {
    match d.u32()? {
        1 | 3 => Ok(false),
        2 | 4 => Ok(true),
        _ => Err(xdr::BadXdr),
    }
}

fn one<'a>(code: u32, d: &mut Dec<'a>) -> Decoded<Op<'a>> {
    Ok(match code {
        op::ACCESS => Op::Access(d.u32()?),
        op::CLOSE => Op::Close {
            seqid: d.u32()?,
            stateid: stateid(d)?,
        },
        op::COMMIT => {
            let _offset = d.u64()?;
            let _count = d.u32()?;
            Op::Commit
        }
        op::CREATE => {
            let kind = match d.u32()? {
                5 => CreateKind::Link(d.string()?),
                t @ (3 | 4) => CreateKind::Device {
                    block: t == 3,
                    major: d.u32()?,
                    minor: d.u32()?,
                },
                6 => CreateKind::Socket,
                7 => CreateKind::Fifo,
                2 => CreateKind::Dir,
                _ => CreateKind::Other,
            };
            Op::Create {
                kind,
                name: d.string()?,
                attrs: fattr(d)?,
            }
        }
        op::DELEGPURGE => {
            let _clientid = d.u64()?;
            Op::DelegPurge
        }
        op::DELEGRETURN => {
            stateid(d)?;
            Op::DelegReturn
        }
        op::GETATTR => Op::Getattr(d.bitmap()?),
        op::GETFH => Op::Getfh,
        op::LINK => Op::Link(d.string()?),
        op::LOCK => {
            let write = lock_type(d)?;
            let reclaim = d.bool()?;
            let offset = d.u64()?;
            let length = d.u64()?;
            let locker = if d.bool()? {
                Locker::New {
                    open_seqid: d.u32()?,
                    open_stateid: stateid(d)?,
                    lock_seqid: d.u32()?,
                    owner: owner(d)?,
                }
            } else {
                Locker::Existing {
                    stateid: stateid(d)?,
                    seqid: d.u32()?,
                }
            };
            Op::Lock {
                write,
                reclaim,
                offset,
                length,
                locker,
            }
        }
        op::LOCKT => Op::Lockt {
            write: lock_type(d)?,
            offset: d.u64()?,
            length: d.u64()?,
            owner: owner(d)?,
        },
        op::LOCKU => {
            let _type = lock_type(d)?;
            Op::Locku {
                seqid: d.u32()?,
                stateid: stateid(d)?,
                offset: d.u64()?,
                length: d.u64()?,
            }
        }
        op::LOOKUP => Op::Lookup(d.string()?),
        op::LOOKUPP => Op::Lookupp,
        op::NVERIFY => Op::Nverify(fattr(d)?),
        op::OPEN => {
            let seqid = d.u32()?;
            let access = d.u32()?;
            let deny = d.u32()?;
            let owner = owner(d)?;
            let create = match d.u32()? {
                0 => None,
                1 => Some(match d.u32()? {
                    0 => How::Unchecked(fattr(d)?),
                    1 => How::Guarded(fattr(d)?),
                    2 => How::Exclusive(d.fixed()?),
                    _ => return Err(xdr::BadXdr),
                }),
                _ => return Err(xdr::BadXdr),
            };
            let claim = match d.u32()? {
                0 => Claim::Null(d.string()?),
                1 => {
                    let _delegate_type = d.u32()?;
                    Claim::Previous
                }
                2 => {
                    stateid(d)?;
                    d.string()?;
                    Claim::DelegateCur
                }
                3 => {
                    d.string()?;
                    Claim::DelegatePrev
                }
                _ => return Err(xdr::BadXdr),
            };
            Op::Open(OpenArgs {
                seqid,
                access,
                deny,
                owner,
                create,
                claim,
            })
        }
        op::OPENATTR => {
            let _createdir = d.bool()?;
            Op::Openattr
        }
        op::OPEN_CONFIRM => Op::OpenConfirm {
            stateid: stateid(d)?,
            seqid: d.u32()?,
        },
        op::OPEN_DOWNGRADE => Op::OpenDowngrade {
            stateid: stateid(d)?,
            seqid: d.u32()?,
            access: d.u32()?,
            deny: d.u32()?,
        },
        op::PUTFH => Op::Putfh(d.opaque(FH_MAX)?),
        op::PUTPUBFH => Op::Putpubfh,
        op::PUTROOTFH => Op::Putrootfh,
        op::READ => Op::Read {
            stateid: stateid(d)?,
            offset: d.u64()?,
            count: d.u32()?,
        },
        op::READDIR => {
            let cookie = d.u64()?;
            let _verf: [u8; 8] = d.fixed()?;
            let _dircount = d.u32()?;
            Op::Readdir {
                cookie,
                maxcount: d.u32()?,
                attrs: d.bitmap()?,
            }
        }
        op::READLINK => Op::Readlink,
        op::REMOVE => Op::Remove(d.string()?),
        op::RENAME => Op::Rename {
            old: d.string()?,
            new: d.string()?,
        },
        op::RENEW => Op::Renew(d.u64()?),
        op::RESTOREFH => Op::Restorefh,
        op::SAVEFH => Op::Savefh,
        op::SECINFO => Op::Secinfo(d.string()?),
        op::SETATTR => Op::Setattr {
            stateid: stateid(d)?,
            attrs: fattr(d)?,
        },
        op::SETCLIENTID => {
            let verf = d.fixed()?;
            let id = d.opaque(OPAQUE_LIMIT)?;
            // The callback (program, netid, address) and its ident: never used, since
            // no delegation is ever given.
            let _cb_program = d.u32()?;
            let _netid = d.opaque(OPAQUE_LIMIT)?;
            let _addr = d.opaque(OPAQUE_LIMIT)?;
            let _ident = d.u32()?;
            Op::Setclientid { verf, id }
        }
        op::SETCLIENTID_CONFIRM => Op::SetclientidConfirm {
            clientid: d.u64()?,
            verf: d.fixed()?,
        },
        op::VERIFY => Op::Verify(fattr(d)?),
        op::WRITE => Op::Write {
            stateid: stateid(d)?,
            offset: d.u64()?,
            stable: match d.u32()? {
                s @ 0..=2 => s,
                _ => return Err(xdr::BadXdr),
            },
            data: d.string()?,
        },
        op::RELEASE_LOCKOWNER => Op::ReleaseLockowner(owner(d)?),
        _ => Op::Illegal,
    })
}

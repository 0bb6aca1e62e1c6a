//! COMPOUND arguments decoded into [`Op`]s (`nfs_argop4` of RFC 7531, RFC 8881 and
//! RFC 7862), each field bounded (see `xdr`). Everything borrows from the record:
//! decoding allocates only the list of operations, itself capped at [`MAX_OPS`].
//!
//! Which operations exist depends on the minor version: a number the COMPOUND's minor
//! version does not define is `ILLEGAL`; one it defines that this server does not
//! implement (pNFS, delegations, server-to-server copy, …) is [`Op::NotSupp`], answered
//! `NFS4ERR_NOTSUPP`. Either ends the decoding: the COMPOUND stops at it anyway.

use super::proto::op;
use super::state::Stateid;
pub use super::state::sessions::Channel;
use super::xdr::{self, Bitmap, Dec, Decoded, FH_MAX, OPAQUE_LIMIT};

/// Most operations in one COMPOUND (a Linux client sends under 10; Ganesha caps at 100).
/// More is `NFS4ERR_RESOURCE`, NFSv4.0's answer to a COMPOUND too large to process.
pub const MAX_OPS: u32 = 128;
/// Longest COMPOUND tag (it is echoed in the reply).
pub const TAG_MAX: usize = 1024;
/// The highest minor version served.
pub const MINOR_MAX: u32 = 2;
/// Most stateids one TEST_STATEID names, and callback security entries one
/// CREATE_SESSION carries.
const LIST_MAX: u32 = 1024;

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
    /// EXCLUSIVE4_1 (v4.1+): the verifier and attributes to set.
    Exclusive41([u8; 8], Fattr<'a>),
}

/// OPEN's `open_claim4`.
#[derive(Debug, Clone, Copy)]
pub enum Claim<'a> {
    Null(&'a [u8]),
    Previous,
    DelegateCur,
    DelegatePrev,
    /// CLAIM_FH (v4.1+): the current filehandle is the file.
    Fh,
    /// CLAIM_DELEG_CUR_FH, CLAIM_DELEG_PREV_FH (v4.1+).
    DelegateCurFh,
    DelegatePrevFh,
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

/// COPY's arguments (RFC 7862 §15.2).
#[derive(Debug, Clone, Copy)]
pub struct CopyArgs {
    pub src: Stateid,
    pub dst: Stateid,
    pub src_offset: u64,
    pub dst_offset: u64,
    pub count: u64,
    pub synchronous: bool,
    /// Source servers named (another server's file: not supported).
    pub remote: bool,
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
    // NFSv4.1
    BindConn {
        session: [u8; 16],
        dir: u32,
    },
    ExchangeId {
        verf: [u8; 8],
        owner: &'a [u8],
        flags: u32,
        /// `state_protect4_a`'s `spa_how`: 0 SP4_NONE, 1 SP4_MACH_CRED, 2 SP4_SSV.
        protect: u32,
    },
    CreateSession {
        clientid: u64,
        seq: u32,
        flags: u32,
        fore: Channel,
        back: Channel,
    },
    DestroySession([u8; 16]),
    FreeStateid(Stateid),
    SecinfoNoName(u32),
    Sequence {
        session: [u8; 16],
        seqid: u32,
        slot: u32,
        highest: u32,
        cache: bool,
    },
    /// TEST_STATEID: the stateids' XDR and how many there are.
    TestStateid(&'a [u8], u32),
    DestroyClientid(u64),
    ReclaimComplete,
    // NFSv4.2
    Allocate {
        stateid: Stateid,
        offset: u64,
        length: u64,
    },
    Copy(CopyArgs),
    Deallocate {
        stateid: Stateid,
        offset: u64,
        length: u64,
    },
    Seek {
        stateid: Stateid,
        offset: u64,
        /// NFS4_CONTENT_DATA (0) or NFS4_CONTENT_HOLE (1).
        hole: bool,
    },
    /// An operation of this minor version that is not implemented: `NFS4ERR_NOTSUPP`.
    NotSupp(u32),
    /// An operation number this minor version does not define: `NFS4ERR_OP_ILLEGAL`.
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
            Op::BindConn { .. } => op::BIND_CONN_TO_SESSION,
            Op::ExchangeId { .. } => op::EXCHANGE_ID,
            Op::CreateSession { .. } => op::CREATE_SESSION,
            Op::DestroySession(_) => op::DESTROY_SESSION,
            Op::FreeStateid(_) => op::FREE_STATEID,
            Op::SecinfoNoName(_) => op::SECINFO_NO_NAME,
            Op::Sequence { .. } => op::SEQUENCE,
            Op::TestStateid(..) => op::TEST_STATEID,
            Op::DestroyClientid(_) => op::DESTROY_CLIENTID,
            Op::ReclaimComplete => op::RECLAIM_COMPLETE,
            Op::Allocate { .. } => op::ALLOCATE,
            Op::Copy(_) => op::COPY,
            Op::Deallocate { .. } => op::DEALLOCATE,
            Op::Seek { .. } => op::SEEK,
            Op::NotSupp(code) => *code,
            Op::Illegal => op::ILLEGAL,
        }
    }
}

/// A COMPOUND's header and operations as far as they decode.
pub struct Compound<'a> {
    pub tag: &'a [u8],
    pub minor: u32,
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
    /// A minor version above [`MINOR_MAX`]: `NFS4ERR_MINOR_VERS_MISMATCH` (the tag
    /// echoed).
    MinorVersion(&'a [u8]),
    /// More than [`MAX_OPS`] operations: `NFS4ERR_RESOURCE` (the tag echoed).
    TooMany(&'a [u8]),
}

/// Decodes a COMPOUND's arguments.
pub fn decode(buf: &[u8]) -> Result<Compound<'_>, Refused<'_>> {
    let mut d = Dec::new(buf);
    let tag = d.opaque(TAG_MAX).map_err(|_| Refused::BadXdr)?;
    let minor = d.u32().map_err(|_| Refused::BadXdr)?;
    if minor > MINOR_MAX {
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
        match one(minor, code, &mut d) {
            Ok(op) => {
                let last = matches!(op, Op::Illegal | Op::NotSupp(_));
                ops.push(op);
                if last {
                    break;
                }
            }
            Err(_) => {
                bad = Some(code);
                break;
            }
        }
    }
    let stopped = matches!(ops.last(), Some(Op::Illegal | Op::NotSupp(_)));
    if bad.is_none() && !stopped && !d.at_end() {
        // Bytes after the last operation: the COMPOUND is not what it says it is.
        return Err(Refused::BadXdr);
    }
    Ok(Compound {
        tag,
        minor,
        ops,
        bad,
    })
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
/// lock (the blocking variants are polled by the client).
fn lock_type(d: &mut Dec<'_>) -> Decoded<bool> {
    match d.u32()? {
        1 | 3 => Ok(false),
        2 | 4 => Ok(true),
        _ => Err(xdr::BadXdr),
    }
}

/// One operation of minor version `minor`.
fn one<'a>(minor: u32, code: u32, d: &mut Dec<'a>) -> Decoded<Op<'a>> {
    if !(op::ACCESS..=op::LAST[minor as usize]).contains(&code) {
        return Ok(Op::Illegal);
    }
    if code != op::OPENATTR && op::NOT_IMPLEMENTED.contains(&code) {
        return Ok(Op::NotSupp(code));
    }
    if let Some(o) = files(code, d)? {
        return Ok(o);
    }
    if let Some(o) = opens_and_locks(minor, code, d)? {
        return Ok(o);
    }
    if let Some(o) = clients(code, d)? {
        return Ok(o);
    }
    if let Some(o) = sessions(code, d)? {
        return Ok(o);
    }
    if let Some(o) = v42(code, d)? {
        return Ok(o);
    }
    Ok(Op::NotSupp(code))
}

/// The operations on handles and files.
fn files<'a>(code: u32, d: &mut Dec<'a>) -> Decoded<Option<Op<'a>>> {
    Ok(Some(match code {
        op::ACCESS => Op::Access(d.u32()?),
        op::COMMIT => {
            let _offset = d.u64()?;
            let _count = d.u32()?;
            Op::Commit
        }
        op::CREATE => create(d)?,
        op::GETATTR => Op::Getattr(d.bitmap()?),
        op::GETFH => Op::Getfh,
        op::LINK => Op::Link(d.string()?),
        op::LOOKUP => Op::Lookup(d.string()?),
        op::LOOKUPP => Op::Lookupp,
        op::NVERIFY => Op::Nverify(fattr(d)?),
        op::OPENATTR => {
            let _createdir = d.bool()?;
            Op::Openattr
        }
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
        op::RESTOREFH => Op::Restorefh,
        op::SAVEFH => Op::Savefh,
        op::SECINFO => Op::Secinfo(d.string()?),
        op::SETATTR => Op::Setattr {
            stateid: stateid(d)?,
            attrs: fattr(d)?,
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
        _ => return Ok(None),
    }))
}

fn create<'a>(d: &mut Dec<'a>) -> Decoded<Op<'a>> {
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
    Ok(Op::Create {
        kind,
        name: d.string()?,
        attrs: fattr(d)?,
    })
}

/// OPEN and the operations on open and lock state.
fn opens_and_locks<'a>(minor: u32, code: u32, d: &mut Dec<'a>) -> Decoded<Option<Op<'a>>> {
    Ok(Some(match code {
        op::CLOSE => Op::Close {
            seqid: d.u32()?,
            stateid: stateid(d)?,
        },
        op::DELEGPURGE => {
            let _clientid = d.u64()?;
            Op::DelegPurge
        }
        op::DELEGRETURN => {
            stateid(d)?;
            Op::DelegReturn
        }
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
        op::OPEN => Op::Open(open(minor, d)?),
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
        op::RELEASE_LOCKOWNER => Op::ReleaseLockowner(owner(d)?),
        _ => return Ok(None),
    }))
}

fn open<'a>(minor: u32, d: &mut Dec<'a>) -> Decoded<OpenArgs<'a>> {
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
            3 if minor >= 1 => How::Exclusive41(d.fixed()?, fattr(d)?),
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
        4 if minor >= 1 => Claim::Fh,
        5 if minor >= 1 => {
            stateid(d)?;
            Claim::DelegateCurFh
        }
        6 if minor >= 1 => Claim::DelegatePrevFh,
        _ => return Err(xdr::BadXdr),
    };
    Ok(OpenArgs {
        seqid,
        access,
        deny,
        owner,
        create,
        claim,
    })
}

/// NFSv4.0's client operations.
fn clients<'a>(code: u32, d: &mut Dec<'a>) -> Decoded<Option<Op<'a>>> {
    Ok(Some(match code {
        op::RENEW => Op::Renew(d.u64()?),
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
        _ => return Ok(None),
    }))
}

/// NFSv4.1's client, session and stateid operations.
fn sessions<'a>(code: u32, d: &mut Dec<'a>) -> Decoded<Option<Op<'a>>> {
    Ok(Some(match code {
        op::BIND_CONN_TO_SESSION => {
            let session = d.fixed()?;
            let dir = d.u32()?;
            let _rdma = d.bool()?;
            Op::BindConn { session, dir }
        }
        op::EXCHANGE_ID => exchange_id(d)?,
        op::CREATE_SESSION => create_session(d)?,
        op::DESTROY_SESSION => Op::DestroySession(d.fixed()?),
        op::FREE_STATEID => Op::FreeStateid(stateid(d)?),
        op::SECINFO_NO_NAME => Op::SecinfoNoName(d.u32()?),
        op::SEQUENCE => Op::Sequence {
            session: d.fixed()?,
            seqid: d.u32()?,
            slot: d.u32()?,
            highest: d.u32()?,
            cache: d.bool()?,
        },
        op::TEST_STATEID => {
            let n = d.u32()?;
            if n > LIST_MAX {
                return Err(xdr::BadXdr);
            }
            let start = d.pos();
            for _ in 0..n {
                stateid(d)?;
            }
            Op::TestStateid(d.since(start), n)
        }
        op::DESTROY_CLIENTID => Op::DestroyClientid(d.u64()?),
        op::RECLAIM_COMPLETE => {
            let _one_fs = d.bool()?;
            Op::ReclaimComplete
        }
        _ => return Ok(None),
    }))
}

fn exchange_id<'a>(d: &mut Dec<'a>) -> Decoded<Op<'a>> {
    let verf = d.fixed()?;
    let owner = d.opaque(OPAQUE_LIMIT)?;
    let flags = d.u32()?;
    let protect = d.u32()?;
    match protect {
        0 => {}
        1 => {
            d.bitmap()?;
            d.bitmap()?;
        }
        2 => {
            d.bitmap()?;
            d.bitmap()?;
            for _ in 0..2 {
                // sec_oid4 ssp_hash_algs<>, ssp_encr_algs<>
                let n = d.u32()?;
                if n > LIST_MAX {
                    return Err(xdr::BadXdr);
                }
                for _ in 0..n {
                    d.opaque(OPAQUE_LIMIT)?;
                }
            }
            let _window = d.u32()?;
            let _handles = d.u32()?;
        }
        _ => return Err(xdr::BadXdr),
    }
    // eia_client_impl_id<1>: domain, name, date.
    match d.u32()? {
        0 => {}
        1 => {
            d.opaque(OPAQUE_LIMIT)?;
            d.opaque(OPAQUE_LIMIT)?;
            let _secs = d.u64()?;
            let _nsecs = d.u32()?;
        }
        _ => return Err(xdr::BadXdr),
    }
    Ok(Op::ExchangeId {
        verf,
        owner,
        flags,
        protect,
    })
}

fn channel(d: &mut Dec<'_>) -> Decoded<Channel> {
    let c = Channel {
        headerpad: d.u32()?,
        max_request: d.u32()?,
        max_response: d.u32()?,
        max_response_cached: d.u32()?,
        max_ops: d.u32()?,
        max_requests: d.u32()?,
    };
    // ca_rdma_ird<1>
    match d.u32()? {
        0 => {}
        1 => {
            d.u32()?;
        }
        _ => return Err(xdr::BadXdr),
    }
    Ok(c)
}

fn create_session<'a>(d: &mut Dec<'a>) -> Decoded<Op<'a>> {
    let clientid = d.u64()?;
    let seq = d.u32()?;
    let flags = d.u32()?;
    let fore = channel(d)?;
    let back = channel(d)?;
    let _cb_program = d.u32()?;
    // callback_sec_parms4 csa_sec_parms<>: never used (no callbacks), checked only.
    let n = d.u32()?;
    if n > LIST_MAX {
        return Err(xdr::BadXdr);
    }
    for _ in 0..n {
        match d.u32()? {
            0 => {}
            1 => {
                let _stamp = d.u32()?;
                d.opaque(255)?;
                let _uid = d.u32()?;
                let _gid = d.u32()?;
                let gids = d.u32()?;
                if gids > 16 {
                    return Err(xdr::BadXdr);
                }
                for _ in 0..gids {
                    d.u32()?;
                }
            }
            6 => {
                let _service = d.u32()?;
                d.opaque(OPAQUE_LIMIT)?;
                d.opaque(OPAQUE_LIMIT)?;
            }
            _ => return Err(xdr::BadXdr),
        }
    }
    Ok(Op::CreateSession {
        clientid,
        seq,
        flags,
        fore,
        back,
    })
}

/// NFSv4.2's operations on file contents.
fn v42<'a>(code: u32, d: &mut Dec<'a>) -> Decoded<Option<Op<'a>>> {
    Ok(Some(match code {
        op::ALLOCATE => Op::Allocate {
            stateid: stateid(d)?,
            offset: d.u64()?,
            length: d.u64()?,
        },
        op::DEALLOCATE => Op::Deallocate {
            stateid: stateid(d)?,
            offset: d.u64()?,
            length: d.u64()?,
        },
        op::SEEK => Op::Seek {
            stateid: stateid(d)?,
            offset: d.u64()?,
            hole: match d.u32()? {
                0 => false,
                1 => true,
                _ => return Err(xdr::BadXdr),
            },
        },
        op::COPY => {
            let src = stateid(d)?;
            let dst = stateid(d)?;
            let src_offset = d.u64()?;
            let dst_offset = d.u64()?;
            let count = d.u64()?;
            let _consecutive = d.bool()?;
            let synchronous = d.bool()?;
            // netloc4 ca_source_server<>
            let n = d.u32()?;
            if n > LIST_MAX {
                return Err(xdr::BadXdr);
            }
            for _ in 0..n {
                match d.u32()? {
                    1 | 2 => {
                        d.opaque(OPAQUE_LIMIT)?;
                    }
                    3 => {
                        d.opaque(OPAQUE_LIMIT)?;
                        d.opaque(OPAQUE_LIMIT)?;
                    }
                    _ => return Err(xdr::BadXdr),
                }
            }
            Op::Copy(CopyArgs {
                src,
                dst,
                src_offset,
                dst_offset,
                count,
                synchronous,
                remote: n > 0,
            })
        }
        _ => return Ok(None),
    }))
}

/// Whether operation `o` may stand at position `i` of a COMPOUND of `count` operations
/// of minor version `minor` (RFC 8881 §2.10.6.4): from 4.1 on, a COMPOUND starts with
/// SEQUENCE (`OP_NOT_IN_SESSION`) unless its first operation makes or ends a session
/// and is alone (`NOT_ONLY_OP`); SEQUENCE anywhere else is `SEQUENCE_POS`.
pub fn order(minor: u32, i: usize, o: &Op<'_>, count: usize) -> Result<(), u32> {
    use super::proto;
    if minor == 0 {
        return Ok(());
    }
    let sole = matches!(
        o,
        Op::ExchangeId { .. }
            | Op::CreateSession { .. }
            | Op::DestroySession(_)
            | Op::BindConn { .. }
            | Op::DestroyClientid(_)
    );
    match (i, o) {
        (0, Op::Sequence { .. } | Op::Illegal) => Ok(()),
        (0, _) if sole && count > 1 => Err(proto::NOT_ONLY_OP),
        (0, _) if sole => Ok(()),
        (0, _) => Err(proto::OP_NOT_IN_SESSION),
        (_, Op::Sequence { .. }) => Err(proto::SEQUENCE_POS),
        (_, Op::BindConn { .. }) => Err(proto::NOT_ONLY_OP),
        _ => Ok(()),
    }
}

//! In-process COMPOUNDs against a temporary export: the state machine a client drives
//! (SETCLIENTID → CONFIRM → OPEN → WRITE → READ → CLOSE), locks, stateid and seqid
//! checks, minor versions, and malformed or oversized arguments answered with errors.

use super::proto::{self, op};
use super::xdr::{self, Dec};
use super::*;
use crate::config::Config;

pub(super) fn server(dir: &std::path::Path) -> Nfs4 {
    server_started(dir, 1_700_000_000_000_000_000)
}

/// A server instance that started at `nanos` (its verifier).
fn server_started(dir: &std::path::Path, nanos: u64) -> Nfs4 {
    let registry = Registry::new("t");
    let fs = crate::fs::DirFs::open(&Config::new(dir), registry.clone()).unwrap();
    Nfs4::new(fs, registry, nanos.to_be_bytes(), Settings::default())
}

pub(super) fn root() -> Caller {
    Caller {
        uid: 0,
        gid: 0,
        gids: vec![],
    }
}

/// A COMPOUND with tag "t", minor version `minor`, and the operations (each already
/// encoded with its number).
pub(super) fn compound(minor: u32, ops: &[Vec<u8>]) -> Vec<u8> {
    let mut v = Vec::new();
    xdr::opaque(&mut v, b"t");
    xdr::u32(&mut v, minor);
    xdr::u32(&mut v, ops.len() as u32);
    for o in ops {
        v.extend_from_slice(o);
    }
    v
}

/// One operation: its number, then what `f` appends.
pub(super) fn op(code: u32, f: impl FnOnce(&mut Vec<u8>)) -> Vec<u8> {
    let mut v = Vec::new();
    xdr::u32(&mut v, code);
    f(&mut v);
    v
}

pub(super) fn putroot() -> Vec<u8> {
    op(op::PUTROOTFH, |_| {})
}

pub(super) fn stateid(v: &mut Vec<u8>, s: (u32, [u8; 12])) {
    xdr::u32(v, s.0);
    xdr::fixed(v, &s.1);
}

/// A reply being read: the COMPOUND status, then each operation in turn.
pub(super) struct Reply {
    pub(super) buf: Vec<u8>,
    pub(super) pos: usize,
    pub(super) status: u32,
    pub(super) count: u32,
}

impl Reply {
    pub(super) fn new(buf: Vec<u8>) -> Reply {
        let mut r = Reply {
            buf,
            pos: 0,
            status: 0,
            count: 0,
        };
        r.status = r.u32();
        let tag = r.opaque();
        assert!(tag.is_empty() || tag == b"t", "tag echoed");
        r.count = r.u32();
        r
    }
    pub(super) fn dec(&self) -> Dec<'_> {
        Dec::new(&self.buf[self.pos..])
    }
    pub(super) fn u32(&mut self) -> u32 {
        let v = self.dec().u32().unwrap();
        self.pos += 4;
        v
    }
    pub(super) fn u64(&mut self) -> u64 {
        let v = self.dec().u64().unwrap();
        self.pos += 8;
        v
    }
    pub(super) fn opaque(&mut self) -> Vec<u8> {
        let v = self.dec().opaque(usize::MAX).unwrap().to_vec();
        self.pos += xdr::opaque_size(v.len());
        v
    }
    pub(super) fn stateid(&mut self) -> (u32, [u8; 12]) {
        let seqid = self.u32();
        let mut other = [0u8; 12];
        other.copy_from_slice(&self.buf[self.pos..self.pos + 12]);
        self.pos += 12;
        (seqid, other)
    }
    pub(super) fn bitmap(&mut self) -> u64 {
        let n = self.u32();
        let mut bits = 0u64;
        for i in 0..n {
            let w = u64::from(self.u32());
            if i < 2 {
                bits |= w << (32 * i);
            }
        }
        bits
    }
    /// The next operation's number (checked) and status.
    pub(super) fn op(&mut self, code: u32) -> u32 {
        assert_eq!(self.u32(), code, "operation number");
        self.u32()
    }
    pub(super) fn skip(&mut self, n: usize) {
        self.pos += n;
    }
}

pub(super) fn run(s: &Nfs4, args: &[u8]) -> Reply {
    let mut out = Vec::new();
    s.call(1, &root(), Conn::LOCAL, args, &mut out)
        .ok()
        .expect("a COMPOUND result");
    assert!(
        out.len() <= Nfs4::reply_bound(args, false),
        "reply within its bound"
    );
    Reply::new(out)
}

/// SETCLIENTID + SETCLIENTID_CONFIRM: a confirmed client id.
fn client(s: &Nfs4, name: &[u8]) -> u64 {
    let mut r = run(
        s,
        &compound(
            0,
            &[op(op::SETCLIENTID, |v| {
                xdr::fixed(v, &[7; 8]);
                xdr::opaque(v, name);
                xdr::u32(v, 0x4000_0000);
                xdr::opaque(v, b"tcp");
                xdr::opaque(v, b"127.0.0.1.3.4");
                xdr::u32(v, 1);
            })],
        ),
    );
    assert_eq!(r.op(op::SETCLIENTID), proto::OK);
    let cid = r.u64();
    let mut verf = [0u8; 8];
    verf.copy_from_slice(&r.buf[r.pos..r.pos + 8]);
    let confirm = |verf: [u8; 8]| {
        compound(
            0,
            &[op(op::SETCLIENTID_CONFIRM, |v| {
                xdr::u64(v, cid);
                xdr::fixed(v, &verf);
            })],
        )
    };
    assert_eq!(run(s, &confirm([0; 8])).status, proto::STALE_CLIENTID);
    assert_eq!(run(s, &confirm(verf)).status, proto::OK);
    cid
}

/// OPEN (creating, UNCHECKED, mode 0644) of `name` in the root by `owner`: the reply.
fn open_args(cid: u64, owner: &[u8], seqid: u32, name: &[u8], access: u32) -> Vec<u8> {
    compound(
        0,
        &[
            putroot(),
            op(op::OPEN, |v| {
                xdr::u32(v, seqid);
                xdr::u32(v, access);
                xdr::u32(v, 0);
                xdr::u64(v, cid);
                xdr::opaque(v, owner);
                xdr::u32(v, 1); // OPEN4_CREATE
                xdr::u32(v, 0); // UNCHECKED4
                xdr::bitmap(v, 1 << attr::MODE);
                let mut vals = Vec::new();
                xdr::u32(&mut vals, 0o644);
                xdr::opaque(v, &vals);
                xdr::u32(v, 0); // CLAIM_NULL
                xdr::opaque(v, name);
            }),
            op(op::GETFH, |_| {}),
        ],
    )
}

/// Opens (and confirms) `name`: (handle, open stateid).
fn open(s: &Nfs4, cid: u64, owner: &[u8], seqid: u32, name: &[u8]) -> (Vec<u8>, (u32, [u8; 12])) {
    let mut r = run(s, &open_args(cid, owner, seqid, name, 3));
    assert_eq!(r.op(op::PUTROOTFH), proto::OK);
    assert_eq!(r.op(op::OPEN), proto::OK);
    let sid = r.stateid();
    r.skip(4 + 16); // change_info4
    let rflags = r.u32();
    let _attrset = r.bitmap();
    assert_eq!(r.u32(), 0, "no delegation");
    assert_eq!(r.op(op::GETFH), proto::OK);
    let fh = r.opaque();
    if rflags & 2 == 0 {
        return (fh, sid);
    }
    let mut r = run(
        s,
        &compound(
            0,
            &[
                op(op::PUTFH, |v| xdr::opaque(v, &fh)),
                op(op::OPEN_CONFIRM, |v| {
                    stateid(v, sid);
                    xdr::u32(v, seqid + 1);
                }),
            ],
        ),
    );
    assert_eq!(r.op(op::PUTFH), proto::OK);
    assert_eq!(r.op(op::OPEN_CONFIRM), proto::OK);
    let sid = r.stateid();
    assert_eq!(sid.0, 2);
    (fh, sid)
}

pub(super) fn putfh(fh: &[u8]) -> Vec<u8> {
    op(op::PUTFH, |v| xdr::opaque(v, fh))
}

#[test]
fn open_write_read_close() {
    let tmp = tempfile::tempdir().unwrap();
    let s = server(tmp.path());
    let cid = client(&s, b"client-a");
    let (fh, sid) = open(&s, cid, b"owner", 1, b"f");
    let mut r = run(
        &s,
        &compound(
            0,
            &[
                putfh(&fh),
                op(op::WRITE, |v| {
                    stateid(v, sid);
                    xdr::u64(v, 0);
                    xdr::u32(v, 2); // FILE_SYNC4
                    xdr::opaque(v, b"hello v4");
                }),
                op(op::READ, |v| {
                    stateid(v, sid);
                    xdr::u64(v, 6);
                    xdr::u32(v, 100);
                }),
                op(op::GETATTR, |v| {
                    xdr::bitmap(v, (1 << attr::SIZE) | (1 << attr::TYPE) | (1 << 12))
                }),
            ],
        ),
    );
    assert_eq!(r.status, proto::OK);
    r.op(op::PUTFH);
    assert_eq!(r.op(op::WRITE), proto::OK);
    assert_eq!(r.u32(), 8);
    assert_eq!(r.u32(), 2);
    r.skip(8);
    assert_eq!(r.op(op::READ), proto::OK);
    assert_eq!(r.u32(), 1, "eof");
    assert_eq!(r.opaque(), b"v4");
    assert_eq!(r.op(op::GETATTR), proto::OK);
    // Exactly what was asked and is supported (not attribute 12, acl).
    assert_eq!(r.bitmap(), (1 << attr::SIZE) | (1 << attr::TYPE));
    assert_eq!(r.u32(), 12);
    assert_eq!(r.u32(), 1, "NF4REG");
    assert_eq!(r.u64(), 8);
    assert_eq!(std::fs::read(tmp.path().join("f")).unwrap(), b"hello v4");
    // CLOSE, then the stateid is gone.
    let close = |seqid: u32| {
        compound(
            0,
            &[
                putfh(&fh),
                op(op::CLOSE, |v| {
                    xdr::u32(v, seqid);
                    stateid(v, sid);
                }),
            ],
        )
    };
    let mut r = run(&s, &close(3));
    r.op(op::PUTFH);
    assert_eq!(r.op(op::CLOSE), proto::OK);
    assert_eq!(r.stateid().1, sid.1);
    assert_eq!(run(&s, &close(4)).status, proto::BAD_STATEID);
    let mut r = run(
        &s,
        &compound(
            0,
            &[
                putfh(&fh),
                op(op::READ, |v| {
                    stateid(v, sid);
                    xdr::u64(v, 0);
                    xdr::u32(v, 1);
                }),
            ],
        ),
    );
    r.op(op::PUTFH);
    assert_eq!(r.op(op::READ), proto::BAD_STATEID);
    // Owners are numeric strings.
    let mut r = run(
        &s,
        &compound(
            0,
            &[
                putfh(&fh),
                op(op::GETATTR, |v| xdr::bitmap(v, 1 << attr::OWNER)),
            ],
        ),
    );
    r.op(op::PUTFH);
    r.op(op::GETATTR);
    r.bitmap();
    r.u32();
    let uid = std::fs::metadata(tmp.path().join("f"))
        .map(|m| std::os::unix::fs::MetadataExt::uid(&m))
        .unwrap();
    assert_eq!(r.opaque(), uid.to_string().as_bytes());
}

#[test]
fn seqids_replay_and_refuse() {
    let tmp = tempfile::tempdir().unwrap();
    let s = server(tmp.path());
    let cid = client(&s, b"c");
    let (fh, _) = open(&s, cid, b"o", 10, b"f");
    // The owner's last request was OPEN_CONFIRM (seqid 11): the next OPEN is 12.
    let first = run(&s, &open_args(cid, b"o", 12, b"g", 1)).buf;
    let again = run(&s, &open_args(cid, b"o", 12, b"g", 1)).buf;
    assert_eq!(first, again, "a retransmission gets the same reply");
    let mut r = run(&s, &open_args(cid, b"o", 20, b"g", 1));
    r.op(op::PUTROOTFH);
    assert_eq!(r.op(op::OPEN), proto::BAD_SEQID);
    // A stale client id and a stale (other instance's) stateid.
    let mut r = run(&s, &open_args(cid ^ (1 << 40), b"o", 13, b"g", 1));
    r.op(op::PUTROOTFH);
    assert_eq!(r.op(op::OPEN), proto::STALE_CLIENTID);
    let mut r = run(
        &s,
        &compound(
            0,
            &[
                putfh(&fh),
                op(op::WRITE, |v| {
                    stateid(v, (1, [9; 12]));
                    xdr::u64(v, 0);
                    xdr::u32(v, 0);
                    xdr::opaque(v, b"x");
                }),
            ],
        ),
    );
    r.op(op::PUTFH);
    assert_eq!(r.op(op::WRITE), proto::STALE_STATEID);
    // Reclaims: graceless.
    let mut r = run(
        &s,
        &compound(
            0,
            &[
                putfh(&fh),
                op(op::OPEN, |v| {
                    xdr::u32(v, 13);
                    xdr::u32(v, 1);
                    xdr::u32(v, 0);
                    xdr::u64(v, cid);
                    xdr::opaque(v, b"o");
                    xdr::u32(v, 0);
                    xdr::u32(v, 1); // CLAIM_PREVIOUS
                    xdr::u32(v, 0);
                }),
            ],
        ),
    );
    r.op(op::PUTFH);
    assert_eq!(r.op(op::OPEN), proto::NO_GRACE);
}

#[allow(clippy::too_many_arguments)]
fn lock_new(
    fh: &[u8],
    open_sid: (u32, [u8; 12]),
    open_seqid: u32,
    cid: u64,
    lowner: &[u8],
    write: bool,
    offset: u64,
    len: u64,
) -> Vec<u8> {
    compound(
        0,
        &[
            putfh(fh),
            op(op::LOCK, |v| {
                xdr::u32(v, if write { 2 } else { 1 });
                xdr::bool(v, false);
                xdr::u64(v, offset);
                xdr::u64(v, len);
                xdr::bool(v, true);
                xdr::u32(v, open_seqid);
                stateid(v, open_sid);
                xdr::u32(v, 0);
                xdr::u64(v, cid);
                xdr::opaque(v, lowner);
            }),
        ],
    )
}

#[test]
fn locks_conflict_and_release() {
    let tmp = tempfile::tempdir().unwrap();
    let s = server(tmp.path());
    let cid = client(&s, b"c");
    let (fh, a_open) = open(&s, cid, b"A", 1, b"f");
    let (_, b_open) = open(&s, cid, b"B", 1, b"f");
    let mut r = run(
        &s,
        &lock_new(&fh, a_open, 3, cid, b"lockA", true, 0, u64::MAX),
    );
    r.op(op::PUTFH);
    assert_eq!(r.op(op::LOCK), proto::OK);
    let a_lock = r.stateid();
    // B conflicts: DENIED with the holder.
    let mut r = run(&s, &lock_new(&fh, b_open, 3, cid, b"lockB", false, 10, 5));
    r.op(op::PUTFH);
    assert_eq!(r.op(op::LOCK), proto::DENIED);
    assert_eq!((r.u64(), r.u64(), r.u32()), (0, u64::MAX, 2));
    assert_eq!(r.u64(), cid);
    assert_eq!(r.opaque(), b"lockA");
    let lockt = |owner: &[u8]| {
        compound(
            0,
            &[
                putfh(&fh),
                op(op::LOCKT, |v| {
                    xdr::u32(v, 1);
                    xdr::u64(v, 0);
                    xdr::u64(v, 1);
                    xdr::u64(v, cid);
                    xdr::opaque(v, owner);
                }),
            ],
        )
    };
    assert_eq!(run(&s, &lockt(b"lockB")).status, proto::DENIED);
    assert_eq!(run(&s, &lockt(b"lockA")).status, proto::OK);
    // A zero length is INVAL; CLOSE with the lock held is LOCKS_HELD.
    let mut r = run(&s, &lock_new(&fh, b_open, 4, cid, b"lockB", false, 0, 0));
    r.op(op::PUTFH);
    assert_eq!(r.op(op::LOCK), proto::INVAL);
    let close_a = compound(
        0,
        &[
            putfh(&fh),
            op(op::CLOSE, |v| {
                xdr::u32(v, 4);
                stateid(v, a_open);
            }),
        ],
    );
    assert_eq!(run(&s, &close_a).status, proto::LOCKS_HELD);
    // A unlocks; B gets its lock.
    let mut r = run(
        &s,
        &compound(
            0,
            &[
                putfh(&fh),
                op(op::LOCKU, |v| {
                    xdr::u32(v, 2);
                    xdr::u32(v, 1);
                    stateid(v, a_lock);
                    xdr::u64(v, 0);
                    xdr::u64(v, u64::MAX);
                }),
            ],
        ),
    );
    r.op(op::PUTFH);
    assert_eq!(r.op(op::LOCKU), proto::OK);
    assert_eq!(r.stateid().0, a_lock.0 + 1);
    let mut r = run(&s, &lock_new(&fh, b_open, 5, cid, b"lockB", false, 10, 5));
    r.op(op::PUTFH);
    assert_eq!(r.op(op::LOCK), proto::OK);
    // RELEASE_LOCKOWNER of A (no locks now) succeeds; of B is LOCKS_HELD.
    let release = |owner: &[u8]| {
        compound(
            0,
            &[op(op::RELEASE_LOCKOWNER, |v| {
                xdr::u64(v, cid);
                xdr::opaque(v, owner);
            })],
        )
    };
    assert_eq!(run(&s, &release(b"lockA")).status, proto::OK);
    assert_eq!(run(&s, &release(b"lockB")).status, proto::LOCKS_HELD);
}

#[test]
fn minor_versions_above_two_are_refused_and_later_ones_need_a_session() {
    let tmp = tempfile::tempdir().unwrap();
    let s = server(tmp.path());
    for minor in [3, 4, u32::MAX] {
        let r = run(&s, &compound(minor, &[putroot()]));
        assert_eq!(r.status, proto::MINOR_VERS_MISMATCH);
        assert_eq!(r.count, 0);
    }
    for minor in [1, 2] {
        let mut r = run(&s, &compound(minor, &[putroot()]));
        assert_eq!(r.count, 1);
        assert_eq!(r.op(op::PUTROOTFH), proto::OP_NOT_IN_SESSION);
    }
    // NULL, and the procedures version 4 does not have.
    let mut out = Vec::new();
    assert!(s.call(0, &root(), Conn::LOCAL, &[], &mut out).is_ok());
    assert!(matches!(
        s.call(0, &root(), Conn::LOCAL, &[0; 4], &mut out),
        Err(Reject::Garbage)
    ));
    assert!(matches!(
        s.call(2, &root(), Conn::LOCAL, &[], &mut out),
        Err(Reject::ProcUnavail)
    ));
}

#[test]
fn malformed_and_oversized_arguments_are_errors() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::create_dir(tmp.path().join("d")).unwrap();
    let s = server(tmp.path());
    // A header that does not decode.
    assert_eq!(run(&s, b"\0\0").status, proto::BADXDR);
    assert_eq!(run(&s, &u32::MAX.to_be_bytes()).status, proto::BADXDR);
    // Too many operations: refused before anything is allocated for them.
    let mut many = Vec::new();
    xdr::opaque(&mut many, b"t");
    xdr::u32(&mut many, 0);
    xdr::u32(&mut many, 1_000_000_000);
    assert_eq!(run(&s, &many).status, proto::RESOURCE);
    // The operations before a truncated one run; it is BADXDR.
    let mut args = compound(0, &[putroot(), op(op::LOOKUP, |v| xdr::opaque(v, b"d"))]);
    *args.last_mut().unwrap() = 0;
    args.truncate(args.len() - 4);
    let mut a = compound(0, &[putroot(), op(op::GETFH, |_| {})]);
    // 2 ops declared, the second a LOOKUP whose name claims 4 GiB.
    a.truncate(a.len() - 4);
    xdr::u32(&mut a, op::LOOKUP);
    xdr::u32(&mut a, u32::MAX);
    let mut r = run(&s, &a);
    assert_eq!(r.status, proto::BADXDR);
    assert_eq!(r.count, 2);
    assert_eq!(r.op(op::PUTROOTFH), proto::OK);
    assert_eq!(r.op(op::LOOKUP), proto::BADXDR);
    // An over-long handle, a bitmap of a million words, a bad bool, an unknown op.
    let cases: Vec<(Vec<u8>, u32)> = vec![
        (op(op::PUTFH, |v| xdr::opaque(v, &[0; 200])), proto::BADXDR),
        (op(op::GETATTR, |v| xdr::u32(v, 1_000_000)), proto::BADXDR),
        (op(op::OPENATTR, |v| xdr::u32(v, 7)), proto::BADXDR),
        (op(99, |_| {}), proto::OP_ILLEGAL),
        (op(op::GETFH, |_| {}), proto::NOFILEHANDLE),
        (op(op::RESTOREFH, |_| {}), proto::RESTOREFH),
        (
            op(op::PUTFH, |v| xdr::opaque(v, &[1; 10])),
            proto::BADHANDLE,
        ),
    ];
    for (o, want) in cases {
        let r = run(&s, &compound(0, &[o]));
        assert_eq!(r.status, want, "{}", proto::label(want));
    }
    // Names: empty, dot-dot, slash, too long.
    for (name, want) in [
        (&b""[..], proto::INVAL),
        (b"..", proto::BADNAME),
        (b"a/b", proto::BADNAME),
        (&[b'x'; 256][..], proto::NAMETOOLONG),
        (b"missing", proto::NOENT),
    ] {
        let r = run(
            &s,
            &compound(0, &[putroot(), op(op::LOOKUP, |v| xdr::opaque(v, name))]),
        );
        assert_eq!(r.status, want);
    }
    // Trailing bytes after the last operation.
    let mut t = compound(0, &[putroot()]);
    t.extend_from_slice(&[0; 4]);
    assert_eq!(run(&s, &t).status, proto::BADXDR);
    // Arbitrary bytes after a valid header: an error or a result, never a panic, always
    // within the bound taken before.
    let base = compound(
        0,
        &[
            putroot(),
            op(op::GETATTR, |v| xdr::bitmap(v, u64::MAX as u128)),
        ],
    );
    let mut x = 0x2545_f491_4f6c_dd1du64;
    for _ in 0..3000 {
        let mut m = base.clone();
        for _ in 0..3 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let i = (x as usize) % m.len();
            m[i] = (x >> 32) as u8;
        }
        let mut out = Vec::new();
        let _ = s.call(1, &root(), Conn::LOCAL, &m, &mut out);
        assert!(out.len() <= Nfs4::reply_bound(&m, false));
    }
}

#[test]
fn directories_list_in_pages_and_change() {
    let tmp = tempfile::tempdir().unwrap();
    let s = server(tmp.path());
    // CREATE a directory, then files in it by OPEN; list with a small maxcount.
    let mut r = run(
        &s,
        &compound(
            0,
            &[
                putroot(),
                op(op::CREATE, |v| {
                    xdr::u32(v, 2);
                    xdr::opaque(v, b"d");
                    xdr::bitmap(v, 1 << attr::MODE);
                    xdr::opaque(v, &0o750u32.to_be_bytes());
                }),
                op(op::GETFH, |_| {}),
            ],
        ),
    );
    r.op(op::PUTROOTFH);
    assert_eq!(r.op(op::CREATE), proto::OK);
    r.skip(20);
    assert_eq!(r.bitmap(), 1 << attr::MODE);
    r.op(op::GETFH);
    let dfh = r.opaque();
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(tmp.path().join("d"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o7777, 0o750);
    for i in 0..40 {
        std::fs::write(tmp.path().join(format!("d/file-{i:02}")), b"x").unwrap();
    }
    let mut seen = Vec::new();
    let mut cookie = 0u64;
    for _ in 0..100 {
        let mut r = run(
            &s,
            &compound(
                0,
                &[
                    putfh(&dfh),
                    op(op::READDIR, |v| {
                        xdr::u64(v, cookie);
                        xdr::fixed(v, &[0; 8]);
                        xdr::u32(v, 512);
                        xdr::u32(v, 512);
                        xdr::bitmap(v, (1 << attr::TYPE) | (1 << attr::FILEID));
                    }),
                ],
            ),
        );
        r.op(op::PUTFH);
        assert_eq!(r.op(op::READDIR), proto::OK);
        r.skip(8);
        while r.u32() == 1 {
            cookie = r.u64();
            seen.push(String::from_utf8(r.opaque()).unwrap());
            r.bitmap();
            r.opaque();
        }
        if r.u32() == 1 {
            break;
        }
    }
    seen.sort();
    assert_eq!(seen.len(), 40, "{seen:?}");
    assert_eq!(seen[0], "file-00");
    // Too small for one entry.
    let r = run(
        &s,
        &compound(
            0,
            &[
                putfh(&dfh),
                op(op::READDIR, |v| {
                    xdr::u64(v, 0);
                    xdr::fixed(v, &[0; 8]);
                    xdr::u32(v, 16);
                    xdr::u32(v, 16);
                    xdr::bitmap(v, 0);
                }),
            ],
        ),
    );
    assert_eq!(r.status, proto::TOOSMALL);
    // REMOVE of a non-empty directory, then of a file; RENAME via SAVEFH.
    let remove = |dir: &[u8], name: &[u8]| {
        compound(0, &[putfh(dir), op(op::REMOVE, |v| xdr::opaque(v, name))])
    };
    let rfh = {
        let mut r = run(&s, &compound(0, &[putroot(), op(op::GETFH, |_| {})]));
        r.op(op::PUTROOTFH);
        r.op(op::GETFH);
        r.opaque()
    };
    assert_eq!(run(&s, &remove(&rfh, b"d")).status, proto::NOTEMPTY);
    assert_eq!(run(&s, &remove(&dfh, b"file-00")).status, proto::OK);
    let r = run(
        &s,
        &compound(
            0,
            &[
                putfh(&dfh),
                op(op::SAVEFH, |_| {}),
                putroot(),
                op(op::RENAME, |v| {
                    xdr::opaque(v, b"file-01");
                    xdr::opaque(v, b"moved");
                }),
            ],
        ),
    );
    assert_eq!(r.status, proto::OK);
    assert!(tmp.path().join("moved").is_file());
    // LOOKUPP from the directory is the root; from the root, NOENT.
    let mut r = run(
        &s,
        &compound(
            0,
            &[putfh(&dfh), op(op::LOOKUPP, |_| {}), op(op::GETFH, |_| {})],
        ),
    );
    assert_eq!(r.status, proto::OK);
    r.op(op::PUTFH);
    r.op(op::LOOKUPP);
    r.op(op::GETFH);
    assert_eq!(r.opaque(), rfh);
    assert_eq!(
        run(&s, &compound(0, &[putroot(), op(op::LOOKUPP, |_| {})])).status,
        proto::NOENT
    );
}

#[test]
fn data_operations_refuse_what_is_not_a_file() {
    let tmp = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink("elsewhere", tmp.path().join("l")).unwrap();
    let s = server(tmp.path());
    let anon = |v: &mut Vec<u8>| stateid(v, (0, [0; 12]));
    let read = op(op::READ, |v| {
        anon(v);
        xdr::u64(v, 0);
        xdr::u32(v, 10);
    });
    let write = op(op::WRITE, |v| {
        anon(v);
        xdr::u64(v, 0);
        xdr::u32(v, 0);
        xdr::opaque(v, b"x");
    });
    assert_eq!(
        run(&s, &compound(0, &[putroot(), read.clone()])).status,
        proto::ISDIR
    );
    assert_eq!(
        run(&s, &compound(0, &[putroot(), write])).status,
        proto::ISDIR
    );
    let lookup_l = op(op::LOOKUP, |v| xdr::opaque(v, b"l"));
    assert_eq!(
        run(&s, &compound(0, &[putroot(), lookup_l.clone(), read])).status,
        proto::INVAL
    );
    // LOOKUP through a symlink: NFS4ERR_SYMLINK (the client resolves it); READLINK reads it.
    let through = op(op::LOOKUP, |v| xdr::opaque(v, b"x"));
    assert_eq!(
        run(&s, &compound(0, &[putroot(), lookup_l.clone(), through])).status,
        proto::SYMLINK
    );
    let mut r = run(
        &s,
        &compound(0, &[putroot(), lookup_l, op(op::READLINK, |_| {})]),
    );
    assert_eq!(r.status, proto::OK);
    r.op(op::PUTROOTFH);
    r.op(op::LOOKUP);
    r.op(op::READLINK);
    assert_eq!(r.opaque(), b"elsewhere");
}

#[test]
fn share_reservations_open_modes_and_verify() {
    let tmp = tempfile::tempdir().unwrap();
    let s = server(tmp.path());
    let cid = client(&s, b"c");
    // A opens for reading and writing; B asks to write while denying reads: A's read
    // access is in the way.
    let open_with = |owner: &[u8], seqid: u32, access: u32, deny: u32| {
        compound(
            0,
            &[
                putroot(),
                op(op::OPEN, |v| {
                    xdr::u32(v, seqid);
                    xdr::u32(v, access);
                    xdr::u32(v, deny);
                    xdr::u64(v, cid);
                    xdr::opaque(v, owner);
                    xdr::u32(v, 1);
                    xdr::u32(v, 0);
                    xdr::bitmap(v, 0);
                    xdr::opaque(v, &[]);
                    xdr::u32(v, 0);
                    xdr::opaque(v, b"f");
                }),
            ],
        )
    };
    let (fh, _) = open(&s, cid, b"A", 1, b"f");
    let mut r = run(&s, &open_with(b"B", 1, 2, 1));
    r.op(op::PUTROOTFH);
    assert_eq!(r.op(op::OPEN), proto::SHARE_DENIED);
    // A read-only open cannot write or truncate: OPENMODE.
    let mut r = run(&s, &open_with(b"C", 1, 1, 0));
    r.op(op::PUTROOTFH);
    assert_eq!(r.op(op::OPEN), proto::OK);
    let c_sid = r.stateid();
    let confirm = compound(
        0,
        &[
            putfh(&fh),
            op(op::OPEN_CONFIRM, |v| {
                stateid(v, c_sid);
                xdr::u32(v, 2);
            }),
        ],
    );
    let mut r = run(&s, &confirm);
    r.op(op::PUTFH);
    assert_eq!(r.op(op::OPEN_CONFIRM), proto::OK);
    let c_sid = r.stateid();
    let mut r = run(
        &s,
        &compound(
            0,
            &[
                putfh(&fh),
                op(op::WRITE, |v| {
                    stateid(v, c_sid);
                    xdr::u64(v, 0);
                    xdr::u32(v, 0);
                    xdr::opaque(v, b"x");
                }),
            ],
        ),
    );
    r.op(op::PUTFH);
    assert_eq!(r.op(op::WRITE), proto::OPENMODE);
    let mut r = run(
        &s,
        &compound(
            0,
            &[
                putfh(&fh),
                op(op::SETATTR, |v| {
                    stateid(v, c_sid);
                    xdr::bitmap(v, 1 << attr::SIZE);
                    xdr::opaque(v, &0u64.to_be_bytes());
                }),
            ],
        ),
    );
    r.op(op::PUTFH);
    assert_eq!(r.op(op::SETATTR), proto::OPENMODE);
    assert_eq!(r.bitmap(), 0, "attrsset is empty on failure");
    // VERIFY and NVERIFY of the size (0), and GETATTR of a write-only attribute.
    let size = |code: u32, n: u64| {
        compound(
            0,
            &[
                putfh(&fh),
                op(code, |v| {
                    xdr::bitmap(v, 1 << attr::SIZE);
                    xdr::opaque(v, &n.to_be_bytes());
                }),
            ],
        )
    };
    assert_eq!(run(&s, &size(op::VERIFY, 0)).status, proto::OK);
    assert_eq!(run(&s, &size(op::VERIFY, 1)).status, proto::NOT_SAME);
    assert_eq!(run(&s, &size(op::NVERIFY, 0)).status, proto::SAME);
    assert_eq!(run(&s, &size(op::NVERIFY, 1)).status, proto::OK);
    let write_only = compound(
        0,
        &[
            putfh(&fh),
            op(op::GETATTR, |v| xdr::bitmap(v, 1 << attr::TIME_MODIFY_SET)),
        ],
    );
    assert_eq!(run(&s, &write_only).status, proto::INVAL);
    // RENEW of the client, and of one that never was.
    let renew = |c: u64| compound(0, &[op(op::RENEW, |v| xdr::u64(v, c))]);
    assert_eq!(run(&s, &renew(cid)).status, proto::OK);
    assert_eq!(run(&s, &renew(cid + 99)).status, proto::STALE_CLIENTID);
}

#[test]
fn a_compound_asking_more_than_one_reply_holds_is_answered_in_part() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("big"), vec![7u8; 3 << 20]).unwrap();
    let s = server(tmp.path());
    let mut ops = vec![putroot(), op(op::LOOKUP, |v| xdr::opaque(v, b"big"))];
    for i in 0..100u64 {
        ops.push(op(op::READ, |v| {
            stateid(v, (0, [0; 12]));
            xdr::u64(v, (i % 3) << 20);
            xdr::u32(v, 1 << 20);
        }));
    }
    let args = compound(0, &ops);
    assert_eq!(
        Nfs4::reply_bound(&args, false),
        REPLY_MAX,
        "the bound is capped"
    );
    let mut r = run(&s, &args);
    assert_eq!(r.status, proto::RESOURCE);
    r.op(op::PUTROOTFH);
    r.op(op::LOOKUP);
    // Two whole READs, then a short one in what room is left, then RESOURCE.
    let mut got = Vec::new();
    loop {
        let status = r.op(op::READ);
        if status != proto::OK {
            assert_eq!(status, proto::RESOURCE);
            break;
        }
        r.u32();
        got.push(r.opaque().len());
    }
    assert_eq!(&got[..2], &[1 << 20, 1 << 20]);
    assert!(
        got.len() <= 3 && got.iter().sum::<usize>() < REPLY_MAX,
        "{got:?}"
    );
    assert_eq!(r.count as usize, 2 + got.len() + 1);
}

#[test]
fn after_a_restart_old_state_is_stale_and_handles_still_work() {
    let tmp = tempfile::tempdir().unwrap();
    let before = server(tmp.path());
    let cid = client(&before, b"c");
    let (fh, sid) = open(&before, cid, b"o", 1, b"f");
    // The next instance, started 200 ms later (within the same second).
    let after = server_started(tmp.path(), 1_700_000_000_200_000_000);
    let renew = compound(0, &[op(op::RENEW, |v| xdr::u64(v, cid))]);
    assert_eq!(run(&after, &renew).status, proto::STALE_CLIENTID);
    let mut r = run(
        &after,
        &compound(
            0,
            &[
                putfh(&fh),
                op(op::READ, |v| {
                    stateid(v, sid);
                    xdr::u64(v, 0);
                    xdr::u32(v, 1);
                }),
                op(op::GETATTR, |v| xdr::bitmap(v, 1 << attr::SIZE)),
            ],
        ),
    );
    assert_eq!(r.op(op::PUTFH), proto::OK, "handles persist");
    assert_eq!(r.op(op::READ), proto::STALE_STATEID);
    // Reading with the anonymous stateid works on the new instance.
    let mut r = run(
        &after,
        &compound(
            0,
            &[
                putfh(&fh),
                op(op::READ, |v| {
                    stateid(v, (0, [0; 12]));
                    xdr::u64(v, 0);
                    xdr::u32(v, 1);
                }),
            ],
        ),
    );
    r.op(op::PUTFH);
    assert_eq!(r.op(op::READ), proto::OK);
}

/// Issue 31 §3: I/O under a special stateid meets another client's share deny as an
/// OPEN would: LOCKED for READ and WRITE, SHARE_DENIED for a size change (nothing
/// truncated); the bypass stateid reads anyway and writes as the anonymous one; a
/// reserved stateid (all-zero `other`, seqid 1) is BAD_STATEID.
#[test]
fn special_stateids_meet_share_denies() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("f"), b"0123456789").unwrap();
    let s = server(tmp.path());
    let cid = client(&s, b"a");
    let deny = |owner: &[u8], seqid: u32, deny: u32| {
        compound(
            0,
            &[
                putroot(),
                op(op::OPEN, |v| {
                    xdr::u32(v, seqid);
                    xdr::u32(v, 3);
                    xdr::u32(v, deny);
                    xdr::u64(v, cid);
                    xdr::opaque(v, owner);
                    xdr::u32(v, 0);
                    xdr::u32(v, 0);
                    xdr::opaque(v, b"f");
                }),
                op(op::GETFH, |_| {}),
            ],
        )
    };
    let mut r = run(&s, &deny(b"A", 1, 2));
    r.op(op::PUTROOTFH);
    assert_eq!(r.op(op::OPEN), proto::OK);
    r.stateid();
    r.skip(4 + 16 + 4);
    r.bitmap();
    r.skip(4);
    r.op(op::GETFH);
    let fh = r.opaque();
    let io = |code: u32, sid: (u32, [u8; 12])| {
        let o = op(code, |v| {
            stateid(v, sid);
            match code {
                op::READ => {
                    xdr::u64(v, 0);
                    xdr::u32(v, 4);
                }
                op::WRITE => {
                    xdr::u64(v, 0);
                    xdr::u32(v, 2);
                    xdr::opaque(v, b"xy");
                }
                _ => {
                    xdr::bitmap(v, 1 << attr::SIZE);
                    xdr::opaque(v, &0u64.to_be_bytes());
                }
            }
        });
        run(&s, &compound(0, &[putfh(&fh), o])).status
    };
    let (anon, bypass) = ((0, [0u8; 12]), (u32::MAX, [0xffu8; 12]));
    assert_eq!(io(op::WRITE, anon), proto::LOCKED);
    assert_eq!(io(op::WRITE, bypass), proto::LOCKED);
    assert_eq!(io(op::SETATTR, anon), proto::SHARE_DENIED);
    assert_eq!(io(op::SETATTR, bypass), proto::SHARE_DENIED);
    assert_eq!(io(op::READ, anon), proto::OK, "reads are not denied");
    assert_eq!(io(op::READ, (1, [0; 12])), proto::BAD_STATEID);
    assert_eq!(std::fs::read(tmp.path().join("f")).unwrap(), b"0123456789");
    // Another owner denying READ: the anonymous READ is LOCKED, the bypass one reads.
    let mut r = run(&s, &deny(b"B", 1, 1));
    r.op(op::PUTROOTFH);
    assert_eq!(
        r.op(op::OPEN),
        proto::SHARE_DENIED,
        "A has it open for reading"
    );
    // A (never confirmed, so starting over: RFC 7530 §16.16.5) opens denying READ.
    let mut r = run(&s, &deny(b"A", 2, 1));
    r.op(op::PUTROOTFH);
    assert_eq!(r.op(op::OPEN), proto::OK);
    assert_eq!(io(op::READ, anon), proto::LOCKED);
    assert_eq!(io(op::READ, bypass), proto::OK);
}

/// Issue 32 §1: `nfstime4` carries 64-bit signed seconds: times at 2^31, 2^32, 2^33 and
/// before 1970 round-trip through SETATTR and GETATTR (v3's `nfstime3` cannot hold the
/// last three); SET_TO_SERVER_TIME4 for both times sets both to now.
#[test]
fn times_round_trip_with_64_bit_seconds_and_server_time() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("f"), b"x").unwrap();
    let s = server(tmp.path());
    let lookup = op(op::LOOKUP, |v| xdr::opaque(v, b"f"));
    let times = 1u128 << attr::TIME_ACCESS_SET | 1u128 << attr::TIME_MODIFY_SET;
    let get = op(op::GETATTR, |v| {
        xdr::bitmap(v, 1u128 << attr::TIME_ACCESS | 1u128 << attr::TIME_MODIFY)
    });
    let read_back = |r: &mut Reply| {
        r.bitmap();
        r.u32();
        let a = (r.u64() as i64, r.u32());
        let m = (r.u64() as i64, r.u32());
        (a, m)
    };
    for secs in [1i64 << 31, 1 << 32, 1 << 33, -86_400] {
        let set = op(op::SETATTR, |v| {
            stateid(v, (0, [0; 12]));
            xdr::bitmap(v, times);
            let mut vals = Vec::new();
            for ns in [1u32, 2] {
                xdr::u32(&mut vals, 1);
                xdr::u64(&mut vals, secs as u64);
                xdr::u32(&mut vals, ns);
            }
            xdr::opaque(v, &vals);
        });
        let mut r = run(
            &s,
            &compound(0, &[putroot(), lookup.clone(), set, get.clone()]),
        );
        assert_eq!(r.status, proto::OK, "{secs}");
        r.skip(16);
        r.op(op::SETATTR);
        r.bitmap();
        r.op(op::GETATTR);
        assert_eq!(read_back(&mut r), ((secs, 1), (secs, 2)), "{secs}");
    }
    let now_both = op(op::SETATTR, |v| {
        stateid(v, (0, [0; 12]));
        xdr::bitmap(v, times);
        let mut vals = Vec::new();
        xdr::u32(&mut vals, 0);
        xdr::u32(&mut vals, 0);
        xdr::opaque(v, &vals);
    });
    let mut r = run(&s, &compound(0, &[putroot(), lookup, now_both, get]));
    assert_eq!(r.status, proto::OK);
    r.skip(16);
    r.op(op::SETATTR);
    r.bitmap();
    r.op(op::GETATTR);
    let ((a, _), (m, _)) = read_back(&mut r);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    assert!(
        (now - a).abs() < 60 && (now - m).abs() < 60,
        "{a} {m} vs {now}"
    );
}

/// Issue 32 §1: an EXCLUSIVE create keeps its verifier in the access and modification
/// times, and OPEN's `attrset` says so, so the client resets them (the Linux client
/// sets exactly the times `attrset` names; without them an O_EXCL create left the
/// verifier in the times: "atime far in the future").
#[test]
fn an_exclusive_create_names_the_times_holding_its_verifier() {
    let tmp = tempfile::tempdir().unwrap();
    let s = server(tmp.path());
    let cid = client(&s, b"c");
    let args = compound(
        0,
        &[
            putroot(),
            op(op::OPEN, |v| {
                xdr::u32(v, 1);
                xdr::u32(v, 3);
                xdr::u32(v, 0);
                xdr::u64(v, cid);
                xdr::opaque(v, b"o");
                xdr::u32(v, 1);
                xdr::u32(v, 2); // EXCLUSIVE4
                xdr::fixed(v, &[0x7f, 1, 2, 3, 0x7f, 4, 5, 6]);
                xdr::u32(v, 0);
                xdr::opaque(v, b"x");
            }),
        ],
    );
    let mut r = run(&s, &args);
    r.op(op::PUTROOTFH);
    assert_eq!(r.op(op::OPEN), proto::OK);
    r.stateid();
    r.skip(4 + 16 + 4);
    let attrset = r.bitmap();
    let times = (1u64 << attr::TIME_ACCESS_SET) | (1u64 << attr::TIME_MODIFY_SET);
    assert_eq!(attrset & times, times, "attrset {attrset:#x}");
}

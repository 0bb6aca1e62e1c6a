//! In-process COMPOUNDs of minor versions 1 and 2: client records and sessions
//! (EXCHANGE_ID, CREATE_SESSION, SEQUENCE and its reply cache, DESTROY_*), what 4.1
//! retired, open and lock state without seqids, the current stateid, TEST_STATEID and
//! FREE_STATEID, and 4.2's SEEK, ALLOCATE, DEALLOCATE and COPY.

use super::proto::{self, op};
use super::tests::{Reply, compound, op, putroot, run, server, stateid};
use super::xdr;
use super::*;

/// A session: its client, id, and the next sequence id of slot 0.
pub(super) struct Sess {
    cid: u64,
    pub(super) id: [u8; 16],
    pub(super) next: u32,
}

fn exchange_id(owner: &[u8], verf: [u8; 8], flags: u32) -> Vec<u8> {
    op(op::EXCHANGE_ID, |v| {
        xdr::fixed(v, &verf);
        xdr::opaque(v, owner);
        xdr::u32(v, flags);
        xdr::u32(v, 0);
        xdr::u32(v, 0);
    })
}

fn create_session(cid: u64, seq: u32, slots: u32) -> Vec<u8> {
    op(op::CREATE_SESSION, |v| {
        xdr::u64(v, cid);
        xdr::u32(v, seq);
        xdr::u32(v, 0);
        for (cached, n) in [(4096, slots), (0, 1)] {
            for w in [0, 1 << 20, 1 << 20, cached, 16, n, 0] {
                xdr::u32(v, w);
            }
        }
        xdr::u32(v, 0x4000_0000);
        xdr::u32(v, 1);
        xdr::u32(v, 0);
    })
}

pub(super) fn sequence(id: [u8; 16], seq: u32, slot: u32, cache: bool) -> Vec<u8> {
    op(op::SEQUENCE, |v| {
        xdr::fixed(v, &id);
        xdr::u32(v, seq);
        xdr::u32(v, slot);
        xdr::u32(v, slot);
        xdr::bool(v, cache);
    })
}

/// EXCHANGE_ID + CREATE_SESSION at `minor`.
pub(super) fn session(s: &Nfs4, minor: u32, owner: &[u8]) -> Sess {
    let mut r = run(s, &compound(minor, &[exchange_id(owner, [1; 8], 0)]));
    assert_eq!(r.op(op::EXCHANGE_ID), proto::OK);
    let cid = r.u64();
    let seq = r.u32();
    let flags = r.u32();
    assert_eq!(flags & state::sessions::CONFIRMED_R, 0, "a new record");
    let mut r = run(s, &compound(minor, &[create_session(cid, seq, 4)]));
    assert_eq!(r.op(op::CREATE_SESSION), proto::OK);
    let mut id = [0u8; 16];
    id.copy_from_slice(&r.buf[r.pos..r.pos + 16]);
    Sess { cid, id, next: 1 }
}

impl Sess {
    /// A COMPOUND on slot 0: SEQUENCE, then `ops`.
    pub(super) fn call(&mut self, minor: u32, ops: &[Vec<u8>]) -> Vec<u8> {
        let mut all = vec![sequence(self.id, self.next, 0, true)];
        all.extend_from_slice(ops);
        self.next += 1;
        compound(minor, &all)
    }
}

/// The reply after its SEQUENCE result.
pub(super) fn after_sequence(s: &Nfs4, args: &[u8]) -> Reply {
    let mut r = run(s, args);
    assert_eq!(r.op(op::SEQUENCE), proto::OK, "SEQUENCE");
    r.skip(16 + 4 * 5);
    r
}

fn open41(name: &[u8], owner: &[u8], access: u32, create: bool) -> Vec<u8> {
    op(op::OPEN, |v| {
        xdr::u32(v, 0);
        xdr::u32(v, access);
        xdr::u32(v, 0);
        xdr::u64(v, 0); // the client id is the session's, whatever this says
        xdr::opaque(v, owner);
        if create {
            xdr::u32(v, 1);
            xdr::u32(v, 0);
            xdr::bitmap(v, 0);
            xdr::opaque(v, &[]);
        } else {
            xdr::u32(v, 0);
        }
        xdr::u32(v, 0);
        xdr::opaque(v, name);
    })
}

/// OPEN's result after its status: (stateid, rflags).
fn open_result(r: &mut Reply) -> ((u32, [u8; 12]), u32) {
    let sid = r.stateid();
    r.skip(4 + 16);
    let rflags = r.u32();
    r.bitmap();
    assert_eq!(r.u32(), 0, "no delegation");
    (sid, rflags)
}

fn rw(code: u32, sid: (u32, [u8; 12]), offset: u64, data: &[u8]) -> Vec<u8> {
    op(code, |v| {
        stateid(v, sid);
        xdr::u64(v, offset);
        if code == op::WRITE {
            xdr::u32(v, 2);
            xdr::opaque(v, data);
        } else {
            xdr::u32(v, data.len() as u32);
        }
    })
}

const CURRENT: (u32, [u8; 12]) = (1, [0; 12]);

#[test]
fn a_session_opens_writes_reads_and_closes_without_seqids() {
    let tmp = tempfile::tempdir().unwrap();
    let s = server(tmp.path());
    for minor in [1, 2] {
        let mut se = session(&s, minor, format!("c{minor}").as_bytes());
        // OPEN + WRITE + READ + CLOSE in one COMPOUND, all with the current stateid.
        let args = se.call(
            minor,
            &[
                putroot(),
                open41(b"f", b"o", 3, true),
                rw(op::WRITE, CURRENT, 0, b"hello"),
                rw(op::READ, CURRENT, 0, &[0; 5]),
                op(op::CLOSE, |v| {
                    xdr::u32(v, 0);
                    stateid(v, CURRENT);
                }),
            ],
        );
        let mut r = after_sequence(&s, &args);
        assert_eq!(r.status, proto::OK);
        r.op(op::PUTROOTFH);
        assert_eq!(r.op(op::OPEN), proto::OK);
        let (_, rflags) = open_result(&mut r);
        assert_eq!(rflags & 2, 0, "no OPEN_CONFIRM in v4.1");
        assert_eq!(r.op(op::WRITE), proto::OK);
        r.skip(16);
        assert_eq!(r.op(op::READ), proto::OK);
        assert_eq!(r.u32(), 1, "eof");
        assert_eq!(r.opaque(), b"hello");
        assert_eq!(r.op(op::CLOSE), proto::OK);
        assert_eq!(r.stateid(), (u32::MAX, [0; 12]), "the invalid stateid");
        // The operations v4.1 retired.
        for o in [
            op(op::RENEW, |v| xdr::u64(v, se.cid)),
            op(op::RELEASE_LOCKOWNER, |v| {
                xdr::u64(v, se.cid);
                xdr::opaque(v, b"x");
            }),
        ] {
            let args = se.call(minor, &[o]);
            let mut r = after_sequence(&s, &args);
            let code = r.u32();
            assert_eq!(r.u32(), proto::NOTSUPP, "op {code}");
        }
        // 4.1's and 4.2's operations are illegal in 4.0.
        let mut r = run(&s, &compound(0, &[sequence(se.id, se.next, 0, false)]));
        assert_eq!(r.op(op::ILLEGAL), proto::OP_ILLEGAL);
    }
}

#[test]
fn a_retransmitted_request_gets_its_reply_and_runs_once() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("big"), [5u8; 8192]).unwrap();
    let s = server(tmp.path());
    let mut se = session(&s, 1, b"c");
    // A GUARDED create: run twice, the second would be EXIST.
    let create = op(op::OPEN, |v| {
        xdr::u32(v, 0);
        xdr::u32(v, 3);
        xdr::u32(v, 0);
        xdr::u64(v, 0);
        xdr::opaque(v, b"o");
        xdr::u32(v, 1);
        xdr::u32(v, 1); // GUARDED4
        xdr::bitmap(v, 0);
        xdr::opaque(v, &[]);
        xdr::u32(v, 0);
        xdr::opaque(v, b"once");
    });
    let args = se.call(1, &[putroot(), create]);
    let first = run(&s, &args);
    assert_eq!(first.status, proto::OK);
    let again = run(&s, &args);
    assert_eq!(first.buf, again.buf, "the cached reply, byte for byte");
    // The same sequence id with another request is a false retry.
    let other = compound(1, &[sequence(se.id, se.next - 1, 0, true), putroot()]);
    let mut r = run(&s, &other);
    assert_eq!(r.op(op::SEQUENCE), proto::SEQ_FALSE_RETRY);
    // The next seqid runs; one ahead of it, or behind, is misordered.
    let mut r = run(&s, &compound(1, &[sequence(se.id, se.next + 1, 0, false)]));
    assert_eq!(r.op(op::SEQUENCE), proto::SEQ_MISORDERED);
    let ok = se.call(1, &[putroot()]);
    assert_eq!(run(&s, &ok).status, proto::OK);
    let mut r = run(&s, &compound(1, &[sequence(se.id, 1, 0, false)]));
    assert_eq!(r.op(op::SEQUENCE), proto::SEQ_MISORDERED);
    // A slot beyond the table, an unknown session.
    let mut r = run(&s, &compound(1, &[sequence(se.id, 1, 99, false)]));
    assert_eq!(r.op(op::SEQUENCE), proto::BADSLOT);
    let mut r = run(&s, &compound(1, &[sequence([7; 16], 1, 0, false)]));
    assert_eq!(r.op(op::SEQUENCE), proto::BADSESSION);
    // An uncached reply cannot be sent again.
    let uncached = compound(1, &[sequence(se.id, se.next, 0, false), putroot()]);
    se.next += 1;
    assert_eq!(run(&s, &uncached).status, proto::OK);
    let big = se.next;
    let args = compound(
        1,
        &[
            sequence(se.id, big, 0, false),
            putroot(),
            op(op::LOOKUP, |v| xdr::opaque(v, b"big")),
            rw(op::READ, (0, [0; 12]), 0, &[0; 8192]),
        ],
    );
    assert_eq!(
        run(&s, &args).status,
        proto::OK,
        "too large to keep, not asked to"
    );
    let mut r = run(&s, &args);
    assert_eq!(r.op(op::SEQUENCE), proto::RETRY_UNCACHED_REP);
}

#[test]
fn sessions_are_made_once_and_ended() {
    let tmp = tempfile::tempdir().unwrap();
    let s = server(tmp.path());
    let mut r = run(&s, &compound(1, &[exchange_id(b"c", [1; 8], 0)]));
    assert_eq!(r.op(op::EXCHANGE_ID), proto::OK);
    let (cid, seq) = (r.u64(), r.u32());
    let first = run(&s, &compound(1, &[create_session(cid, seq, 2)]));
    assert_eq!(first.status, proto::OK);
    let again = run(&s, &compound(1, &[create_session(cid, seq, 2)]));
    assert_eq!(first.buf, again.buf, "a retransmitted CREATE_SESSION");
    let mut r = run(&s, &compound(1, &[create_session(cid, seq + 5, 2)]));
    assert_eq!(r.op(op::CREATE_SESSION), proto::SEQ_MISORDERED);
    // The client again, same verifier: confirmed, the same client id.
    let mut r = run(&s, &compound(1, &[exchange_id(b"c", [1; 8], 0)]));
    assert_eq!(r.op(op::EXCHANGE_ID), proto::OK);
    assert_eq!(r.u64(), cid);
    r.u32();
    assert_ne!(r.u32() & state::sessions::CONFIRMED_R, 0);
    // An update needs the record's verifier.
    let mut r = run(
        &s,
        &compound(
            1,
            &[exchange_id(
                b"c",
                [2; 8],
                state::sessions::UPD_CONFIRMED_REC,
            )],
        ),
    );
    assert_eq!(r.op(op::EXCHANGE_ID), proto::NOT_SAME);
    // Sole operations stand alone; others need a SEQUENCE first.
    let mut r = run(&s, &compound(1, &[exchange_id(b"d", [1; 8], 0), putroot()]));
    assert_eq!(r.op(op::EXCHANGE_ID), proto::NOT_ONLY_OP);
    let mut se = Sess {
        cid,
        id: first.buf[first.buf.len() - 2 * 28 - 8 - 16..][..16]
            .try_into()
            .unwrap(),
        next: 1,
    };
    let args = se.call(1, &[putroot(), sequence(se.id, 9, 0, false)]);
    let mut r = after_sequence(&s, &args);
    r.op(op::PUTROOTFH);
    assert_eq!(r.op(op::SEQUENCE), proto::SEQUENCE_POS);
    // RECLAIM_COMPLETE once; SECINFO_NO_NAME answers AUTH_SYS and consumes the handle.
    let args = se.call(1, &[op(op::RECLAIM_COMPLETE, |v| xdr::bool(v, false))]);
    assert_eq!(after_sequence(&s, &args).status, proto::OK);
    let args = se.call(1, &[op(op::RECLAIM_COMPLETE, |v| xdr::bool(v, false))]);
    assert_eq!(after_sequence(&s, &args).status, proto::COMPLETE_ALREADY);
    let args = se.call(
        1,
        &[
            putroot(),
            op(op::SECINFO_NO_NAME, |v| xdr::u32(v, 0)),
            op(op::GETFH, |_| {}),
        ],
    );
    let mut r = after_sequence(&s, &args);
    r.op(op::PUTROOTFH);
    assert_eq!(r.op(op::SECINFO_NO_NAME), proto::OK);
    assert_eq!((r.u32(), r.u32()), (1, oncrpc::msg::flavor::AUTH_SYS));
    assert_eq!(r.op(op::GETFH), proto::NOFILEHANDLE);
    // DESTROY_CLIENTID while a session lives is refused; after DESTROY_SESSION it ends
    // the client, whose session is gone.
    let mut r = run(
        &s,
        &compound(1, &[op(op::DESTROY_CLIENTID, |v| xdr::u64(v, cid))]),
    );
    assert_eq!(r.op(op::DESTROY_CLIENTID), proto::CLIENTID_BUSY);
    let mut r = run(
        &s,
        &compound(1, &[op(op::DESTROY_SESSION, |v| xdr::fixed(v, &se.id))]),
    );
    assert_eq!(r.op(op::DESTROY_SESSION), proto::OK);
    let mut r = run(&s, &compound(1, &[sequence(se.id, se.next, 0, false)]));
    assert_eq!(r.op(op::SEQUENCE), proto::BADSESSION);
    let mut r = run(
        &s,
        &compound(1, &[op(op::DESTROY_CLIENTID, |v| xdr::u64(v, cid))]),
    );
    assert_eq!(r.op(op::DESTROY_CLIENTID), proto::OK);
}

#[test]
fn test_and_free_stateids() {
    let tmp = tempfile::tempdir().unwrap();
    let s = server(tmp.path());
    let mut se = session(&s, 1, b"c");
    let args = se.call(1, &[putroot(), open41(b"f", b"o", 3, true)]);
    let mut r = after_sequence(&s, &args);
    r.op(op::PUTROOTFH);
    assert_eq!(r.op(op::OPEN), proto::OK);
    let (open, _) = open_result(&mut r);
    let test = |list: &[(u32, [u8; 12])]| {
        op(op::TEST_STATEID, |v| {
            xdr::u32(v, list.len() as u32);
            for sid in list {
                stateid(v, *sid);
            }
        })
    };
    let args = se.call(
        1,
        &[test(&[
            open,
            (0, open.1),
            (open.0 + 1, open.1),
            (1, [9; 12]),
            (0, [0; 12]),
        ])],
    );
    let mut r = after_sequence(&s, &args);
    assert_eq!(r.op(op::TEST_STATEID), proto::OK);
    let n = r.u32();
    let got: Vec<u32> = (0..n).map(|_| r.u32()).collect();
    assert_eq!(
        got,
        [
            proto::OK,
            proto::OK,
            proto::BAD_STATEID,
            proto::BAD_STATEID,
            proto::BAD_STATEID
        ]
    );
    // An open stateid cannot be freed (CLOSE frees it).
    let args = se.call(1, &[op(op::FREE_STATEID, |v| stateid(v, open))]);
    assert_eq!(after_sequence(&s, &args).status, proto::LOCKS_HELD);
}

#[test]
fn v4_2_seeks_allocates_punches_and_copies() {
    use std::os::unix::fs::FileExt;
    let tmp = tempfile::tempdir().unwrap();
    // A sparse file: data at 0 and at 1 MiB, a hole between.
    let f = std::fs::File::create(tmp.path().join("sparse")).unwrap();
    f.write_all_at(&[7; 4096], 0).unwrap();
    f.write_all_at(&[8; 4096], 1 << 20).unwrap();
    drop(f);
    let s = server(tmp.path());
    let mut se = session(&s, 2, b"c");
    let anon = (0, [0u8; 12]);
    let lookup = |name: &[u8]| op(op::LOOKUP, |v| xdr::opaque(v, name));
    let seek = |offset: u64, hole: bool| {
        op(op::SEEK, |v| {
            stateid(v, anon);
            xdr::u64(v, offset);
            xdr::u32(v, u32::from(hole));
        })
    };
    let args = se.call(
        2,
        &[
            putroot(),
            lookup(b"sparse"),
            seek(0, true),
            seek(8192, false),
            seek(1 << 20, true),
        ],
    );
    let mut r = after_sequence(&s, &args);
    assert_eq!(r.status, proto::OK);
    r.skip(16);
    r.op(op::SEEK);
    let (eof, hole) = (r.u32(), r.u64());
    assert_eq!(eof, 0);
    assert!(
        (4096..1 << 20).contains(&hole),
        "a hole after the first data: {hole}"
    );
    r.op(op::SEEK);
    assert_eq!((r.u32(), r.u64()), (0, 1 << 20), "data again at 1 MiB");
    r.op(op::SEEK);
    assert_eq!(
        (r.u32(), r.u64()),
        (1, (1 << 20) + 4096),
        "the hole at the end"
    );
    let args = se.call(2, &[putroot(), lookup(b"sparse"), seek(5 << 20, false)]);
    assert_eq!(after_sequence(&s, &args).status, proto::NXIO);
    // ALLOCATE grows the file; DEALLOCATE punches the first data out.
    let space = |code: u32, offset: u64, len: u64| {
        op(code, |v| {
            stateid(v, anon);
            xdr::u64(v, offset);
            xdr::u64(v, len);
        })
    };
    let args = se.call(
        2,
        &[
            putroot(),
            lookup(b"sparse"),
            space(op::ALLOCATE, 2 << 20, 4096),
            space(op::DEALLOCATE, 0, 4096),
        ],
    );
    assert_eq!(after_sequence(&s, &args).status, proto::OK);
    let meta = std::fs::metadata(tmp.path().join("sparse")).unwrap();
    assert_eq!(meta.len(), (2 << 20) + 4096);
    let mut head = [1u8; 4096];
    std::fs::File::open(tmp.path().join("sparse"))
        .unwrap()
        .read_exact_at(&mut head, 0)
        .unwrap();
    assert_eq!(head, [0; 4096], "punched");
    // COPY from the saved handle to the current one.
    std::fs::write(tmp.path().join("dst"), b"").unwrap();
    let args = se.call(
        2,
        &[
            putroot(),
            lookup(b"sparse"),
            op(op::SAVEFH, |_| {}),
            putroot(),
            lookup(b"dst"),
            op(op::COPY, |v| {
                stateid(v, anon);
                stateid(v, anon);
                xdr::u64(v, 1 << 20);
                xdr::u64(v, 10);
                xdr::u64(v, 4096);
                xdr::bool(v, true);
                xdr::bool(v, true);
                xdr::u32(v, 0);
            }),
        ],
    );
    let mut r = after_sequence(&s, &args);
    assert_eq!(r.status, proto::OK);
    r.skip(8 * 5);
    assert_eq!(r.op(op::COPY), proto::OK);
    assert_eq!(r.u32(), 0, "no callback id");
    assert_eq!(r.u64(), 4096);
    let copied = std::fs::read(tmp.path().join("dst")).unwrap();
    assert_eq!(copied.len(), 10 + 4096);
    assert!(copied[10..].iter().all(|b| *b == 8));
    // What 4.2 defines and this server does not do.
    for code in [op::READ_PLUS, op::CLONE, op::LAYOUTGET, op::GETXATTR] {
        let args = se.call(2, &[putroot(), op(code, |v| xdr::u32(v, 0))]);
        let mut r = after_sequence(&s, &args);
        r.op(op::PUTROOTFH);
        assert_eq!(r.op(code), proto::NOTSUPP, "op {code}");
    }
    // And 4.2's operations are illegal in 4.1.
    let args = se.call(1, &[putroot(), seek(0, false)]);
    let mut r = after_sequence(&s, &args);
    r.op(op::PUTROOTFH);
    assert_eq!(r.op(op::ILLEGAL), proto::OP_ILLEGAL);
}

#[test]
fn the_attributes_each_minor_version_supports() {
    let tmp = tempfile::tempdir().unwrap();
    let s = server(tmp.path());
    let mut se = session(&s, 2, b"c");
    let supported = |s: &Nfs4, args: Vec<u8>, seq: bool| {
        let mut r = if seq {
            after_sequence(s, &args)
        } else {
            run(s, &args)
        };
        r.op(op::PUTROOTFH);
        assert_eq!(r.op(op::GETATTR), proto::OK);
        r.u32();
        r.u32();
        r.u32();
        let n = r.u32();
        (0..n).map(|_| r.u32()).collect::<Vec<u32>>()
    };
    let getattr = || op(op::GETATTR, |v| xdr::bitmap(v, 1));
    let v40 = supported(&s, compound(0, &[putroot(), getattr()]), false);
    assert_eq!(v40.len(), 2, "4.0: two words");
    let v41 = supported(&s, se.call(1, &[putroot(), getattr()]), true);
    assert_eq!(v41[2], 1 << (attr::SUPPATTR_EXCLCREAT - 64));
    let v42 = supported(&s, se.call(2, &[putroot(), getattr()]), true);
    assert_ne!(v42[2] & (1 << (attr::CHANGE_ATTR_TYPE - 64)), 0);
}

/// Sessions are state like any other: a client may hold four (the fifth is DELAY, v4.1's
/// answer to a state cap), and the others' keep working.
#[test]
fn sessions_per_client_are_capped() {
    let tmp = tempfile::tempdir().unwrap();
    let s = server(tmp.path());
    let mut r = run(&s, &compound(1, &[exchange_id(b"greedy", [1; 8], 0)]));
    assert_eq!(r.op(op::EXCHANGE_ID), proto::OK);
    let (cid, mut seq) = (r.u64(), r.u32());
    let cap = state::limits::Limits::default()
        .per_client
        .get(state::limits::Kind::Session);
    for i in 0..=cap {
        let mut r = run(&s, &compound(1, &[create_session(cid, seq, 2)]));
        let status = r.op(op::CREATE_SESSION);
        if i < cap {
            assert_eq!(status, proto::OK, "session {i}");
            seq += 1;
        } else {
            assert_eq!(status, proto::DELAY, "session {i}, over the cap");
        }
    }
    let mut other = session(&s, 1, b"other");
    let args = other.call(1, &[putroot()]);
    assert_eq!(after_sequence(&s, &args).status, proto::OK);
}

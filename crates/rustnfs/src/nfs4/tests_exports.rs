//! NFSv4.1 and 4.2 operations through an exports file's pseudo-filesystem: each
//! reaches its export through the same per-client view as the 4.0 ones — read-only
//! where the client's options say so, never from one export into another.

use std::net::SocketAddr;

use super::proto::{self, op};
use super::tests::{Reply, op, putroot, stateid};
use super::tests41::{after_sequence, session};
use super::xdr;
use super::*;
use crate::config::Config;
use crate::exports::{CallFrom, CallScope};

/// The anonymous stateid (all zeros).
const ANON: (u32, [u8; 12]) = (0, [0u8; 12]);

/// Two exports, `a` (rw for everyone) and `b` (read-only for 10.1.2.3, rw for the
/// rest), each holding a file `f` and `g`, served from an exports file.
struct Two {
    tmp: tempfile::TempDir,
    nfs4: Nfs4,
}

impl Two {
    fn new() -> Two {
        let tmp = tempfile::tempdir().unwrap();
        let mut lines = String::new();
        for (d, clients) in [
            ("a", "*(rw,no_root_squash)"),
            ("b", "10.1.2.3(ro,no_root_squash) *(rw,no_root_squash)"),
        ] {
            let dir = tmp.path().join(d);
            std::fs::create_dir(&dir).unwrap();
            std::fs::write(dir.join("f"), d.repeat(4096)).unwrap();
            std::fs::write(dir.join("g"), b"").unwrap();
            lines += &format!("{} {clients}\n", dir.display());
        }
        let file = tmp.path().join("exports");
        std::fs::write(&file, lines).unwrap();
        let mut config = Config::new("/");
        config.exports_file = Some(file);
        let registry = Registry::new("t");
        let exports = Exports::open(&config, registry.clone()).unwrap();
        let nfs4 = Nfs4::new(
            exports,
            registry,
            [0, 0, 0, 1, 2, 3, 4, 5],
            Settings::default(),
        );
        Two { tmp, nfs4 }
    }

    /// PUTROOTFH and the LOOKUPs from the pseudo root to `path` (beneath the temporary
    /// directory): through pseudo directories into an export.
    fn walk(&self, path: &str) -> Vec<Vec<u8>> {
        let full = self.tmp.path().join(path);
        let mut ops = vec![putroot()];
        for c in full.components().skip(1) {
            let name = c.as_os_str().as_encoded_bytes();
            ops.push(op(op::LOOKUP, |v| xdr::opaque(v, name)));
        }
        ops
    }
}

/// Calls from `peer` over NFSv4 while the returned scope lives (the dispatcher enters
/// it for every call that comes through the front door).
fn from(peer: &str) -> CallScope {
    CallScope::enter(CallFrom {
        peer: Some(peer.parse::<SocketAddr>().unwrap()),
        v4: true,
    })
}

fn space(code: u32, offset: u64, len: u64) -> Vec<u8> {
    op(code, |v| {
        stateid(v, ANON);
        xdr::u64(v, offset);
        xdr::u64(v, len);
    })
}

/// COPY of `count` bytes from offset 0 of the saved file to offset 0 of the current.
fn copy(count: u64) -> Vec<u8> {
    op(op::COPY, |v| {
        stateid(v, ANON);
        stateid(v, ANON);
        xdr::u64(v, 0);
        xdr::u64(v, 0);
        xdr::u64(v, count);
        xdr::bool(v, true);
        xdr::bool(v, true);
        xdr::u32(v, 0);
    })
}

/// OPEN of the current filehandle (CLAIM_FH) for `access`.
fn open_fh(access: u32) -> Vec<u8> {
    op(op::OPEN, |v| {
        xdr::u32(v, 0);
        xdr::u32(v, access);
        xdr::u32(v, 0);
        xdr::u64(v, 0);
        xdr::opaque(v, b"owner");
        xdr::u32(v, 0); // OPEN4_NOCREATE
        xdr::u32(v, 4); // CLAIM_FH
    })
}

/// `ops` followed by `last`: every operation before `last` succeeds, and the
/// COMPOUND ends with `last`'s status.
fn ends_with(r: &Reply, ops: usize, status: u32, what: &str) {
    assert_eq!(r.status, status, "{what}: status");
    assert_eq!(
        r.count as usize,
        ops + 1,
        "{what}: SEQUENCE and every operation ran"
    );
}

#[test]
fn v4_2_operations_keep_to_their_export_and_its_options_for_the_client() {
    let two = Two::new();
    let s = &two.nfs4;
    let mut se = session(s, 2, b"exports");
    let file = |path: &str| two.walk(path);
    let then = |mut ops: Vec<Vec<u8>>, more: &[Vec<u8>]| {
        ops.extend_from_slice(more);
        ops
    };
    {
        // 10.1.2.3 has `b` read-only: 4.2's changes are ROFS there, as 4.0's are.
        let _c = from("10.1.2.3:900");
        for (what, last) in [
            ("ALLOCATE", space(op::ALLOCATE, 0, 8192)),
            ("DEALLOCATE", space(op::DEALLOCATE, 0, 4096)),
            ("OPEN CLAIM_FH for write", open_fh(2)),
        ] {
            let ops = then(file("b/f"), &[last]);
            let r = after_sequence(s, &se.call(2, &ops));
            ends_with(&r, ops.len(), proto::ROFS, what);
        }
        let ops = then(file("b/f"), &[op(op::SAVEFH, |_| {})]);
        let ops = then(then(ops, &file("b/g")), &[copy(0)]);
        let r = after_sequence(s, &se.call(2, &ops));
        ends_with(&r, ops.len(), proto::ROFS, "COPY within b");
        // Reading stays allowed: SEEK answers.
        let seek = op(op::SEEK, |v| {
            stateid(v, ANON);
            xdr::u64(v, 0);
            xdr::u32(v, 0);
        });
        let ops = then(file("b/f"), &[seek]);
        let r = after_sequence(s, &se.call(2, &ops));
        ends_with(&r, ops.len(), proto::OK, "SEEK");
        // LOOKUPP from b's root is the pseudo directory above it, which
        // SECINFO_NO_NAME answers for.
        let getfh = op(op::GETFH, |_| {});
        let ops = then(file("b"), &[op(op::LOOKUPP, |_| {}), getfh.clone()]);
        let mut r = after_sequence(s, &se.call(2, &ops));
        ends_with(&r, ops.len(), proto::OK, "LOOKUPP");
        for _ in 0..ops.len() - 1 {
            let code = r.u32();
            assert_eq!(r.u32(), proto::OK, "op {code}");
        }
        assert_eq!(r.op(op::GETFH), proto::OK);
        let parent = r.opaque();
        let ops = then(file(""), &[getfh]);
        let mut r = after_sequence(s, &se.call(2, &ops));
        r.skip(8 * (ops.len() - 1));
        assert_eq!(r.op(op::GETFH), proto::OK);
        assert_eq!(r.opaque(), parent, "LOOKUPP reached the pseudo parent");
        let ops = then(
            file("b"),
            &[
                op(op::LOOKUPP, |_| {}),
                op(op::SECINFO_NO_NAME, |v| xdr::u32(v, 0)),
            ],
        );
        let r = after_sequence(s, &se.call(2, &ops));
        ends_with(
            &r,
            ops.len(),
            proto::OK,
            "SECINFO_NO_NAME in the pseudo-filesystem",
        );
    }
    // Another client has `b` read-write: the same ALLOCATE grows the file.
    let _c = from("10.9.9.9:900");
    let ops = then(file("b/f"), &[space(op::ALLOCATE, 0, 8192)]);
    let r = after_sequence(s, &se.call(2, &ops));
    ends_with(&r, ops.len(), proto::OK, "ALLOCATE, rw");
    let b_f = two.tmp.path().join("b/f");
    assert_eq!(std::fs::metadata(&b_f).unwrap().len(), 8192);
    // COPY from a's file into b's is XDEV (as RENAME and LINK across exports), and
    // changes nothing; within b it copies.
    let ops = then(file("a/f"), &[op(op::SAVEFH, |_| {})]);
    let ops = then(then(ops, &file("b/g")), &[copy(0)]);
    let r = after_sequence(s, &se.call(2, &ops));
    ends_with(&r, ops.len(), proto::XDEV, "COPY from a into b");
    assert_eq!(
        std::fs::metadata(two.tmp.path().join("b/g")).unwrap().len(),
        0
    );
    let ops = then(file("b/f"), &[op(op::SAVEFH, |_| {})]);
    let ops = then(then(ops, &file("b/g")), &[copy(4096)]);
    let r = after_sequence(s, &se.call(2, &ops));
    ends_with(&r, ops.len(), proto::OK, "COPY within b");
    let copied = std::fs::read(two.tmp.path().join("b/g")).unwrap();
    assert_eq!(copied, b"b".repeat(4096));
    // RENAME across the two is XDEV too (the 4.0 rule the 4.2 one follows).
    let rename = op(op::RENAME, |v| {
        xdr::opaque(v, b"f");
        xdr::opaque(v, b"h");
    });
    let ops = then(file("a"), &[op(op::SAVEFH, |_| {})]);
    let ops = then(then(ops, &file("b")), &[rename]);
    let r = after_sequence(s, &se.call(2, &ops));
    ends_with(&r, ops.len(), proto::XDEV, "RENAME from a into b");
}
